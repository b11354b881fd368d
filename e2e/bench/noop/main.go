// Command noop-http is the HTTP ceiling for benchmarks: a Go net/http server
// that reads each request body and answers with a fixed Zaqar-shaped 201,
// touching no storage. A queue server cannot be faster than this on the same
// machine, so benchmarks report their throughput as a fraction of it.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
)

// reply has the size and shape of a one-message POST answer.
var reply = []byte(`{"resources": ["/v2/queues/bench/messages/00000000-0000-4000-8000-000000000000"]}`)

func handle(w http.ResponseWriter, r *http.Request) {
	// Reading the body costs what a real server pays to parse it off the wire.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", "/v2/queues/bench/messages?ids=00000000-0000-4000-8000-000000000000")
	w.WriteHeader(http.StatusCreated)
	w.Write(reply)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8899", "address to listen on")
	flag.Parse()
	log.Printf("noop-http listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, http.HandlerFunc(handle)))
}
