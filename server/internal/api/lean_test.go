package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/config"
)

// seenRequest is what a handler can see of a request.
type seenRequest struct {
	Method, Path, RawPath, RawQuery, RequestURI, Host string
	ForceQuery, Close                                 bool
	Header                                            http.Header
	ContentLength                                     int64
	Body                                              string
}

func seen(r *http.Request) seenRequest {
	b, _ := io.ReadAll(r.Body)
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return seenRequest{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery,
		RequestURI: r.RequestURI, Host: r.Host, ForceQuery: r.URL.ForceQuery, Close: r.Close, Header: h,
		ContentLength: r.ContentLength, Body: string(b)}
}

// Pieces of generated requests: the first of each list is well formed,
// and so is every piece of the lists named good; the bad ones are what
// hostile or unusual clients send.
var (
	goodMethods   = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	badMethods    = []string{"HEAD", "OPTIONS", "get", "CONNECT", "PRI", "POST\t", "TRACE", ""}
	goodSegments  = []string{"v2", "queues", "q-1", "messages", "claims", "a.b", "x_y~", "health", "$&+,:;=@"}
	badSegments   = []string{"%41", "%2F", "..", ".", "", " ", "#f", "é", "\t", "!", "*", "'", "(", ")", "a\x00", "\x7f"}
	goodQueries   = []string{"limit=1", "echo=true&include_claimed=1", "ids=a,b", "claim_id=abc", "a=%41+b", "x=/?:@!$'()*"}
	badQueries    = []string{"", "a b", "#frag", "é", "a\x01"}
	goodNames     = []string{"Client-ID", "X-Project-ID", "Content-Type", "Accept", "User-Agent", "x-auth-token", "ACCEPT", "X-Custom-1"}
	badNames      = []string{"Transfer-Encoding", "Expect", "Upgrade", "TE", "Trailer", "Pragma", "Bad Name", "X_Under", "", "é", "X:Y", " Lead"}
	goodValues    = []string{"application/json", "3381af92-2b9e-11e3-b191-71861300734c", "p1", " padded ", "a\tb", "", "*/*", "q=0.5, x"}
	badValues     = []string{"é", "a\x01b", "a\rb", "\x7f", "chunked", "100-continue", "gzip, chunked"}
	goodHosts     = []string{"localhost", "127.0.0.1:8888", "[::1]:80", "sluice.example-1.dev"}
	badHosts      = []string{"", "a b", "a/b", "h\x01", "é", "a,b", "x@y"}
	goodLengths   = []string{"0", "1", "12", "007"}
	badLengths    = []string{"-1", "+5", "1 2", "0x10", "", "99999999999999999999", "1,1"}
	goodProtos    = []string{"HTTP/1.1"}
	badProtos     = []string{"HTTP/1.0", "HTTP/1.2", "http/1.1", "HTTP/2.0", "HTTP/1.1 ", "HTTP/1"}
	goodConns     = []string{"keep-alive", "Keep-Alive"}
	badConns      = []string{"close", "upgrade", "keep-alive, close", "Close"}
	goodEOLs      = []string{"\r\n"}
	badEOLs       = []string{"\n", "\r", "\r\r\n"}
	goodSeparator = []string{": ", ":", ":  ", ":\t"}
	badSeparator  = []string{" : ", " :", ""}
)

// draw picks from good, or, when hostile says so, from bad; it reports
// whether it took a bad piece.
func draw(t *rapid.T, name string, good, bad []string, hostile bool) (string, bool) {
	if hostile && len(bad) > 0 && rapid.IntRange(0, 5).Draw(t, name+"-bad?") == 0 {
		return rapid.SampledFrom(bad).Draw(t, name), true
	}
	return rapid.SampledFrom(good).Draw(t, name), false
}

// genRequest draws a request (head and body) and whether any piece of it
// was drawn from the bad lists.
func genRequest(t *rapid.T) (string, bool) {
	hostile := rapid.Bool().Draw(t, "hostile")
	bad := false
	take := func(name string, good, badList []string) string {
		s, b := draw(t, name, good, badList, hostile)
		bad = bad || b
		return s
	}
	var sb strings.Builder
	eol := take("eol", goodEOLs, badEOLs)
	sb.WriteString(take("method", goodMethods, badMethods))
	sb.WriteString(" ")
	for i, n := 0, rapid.IntRange(0, 5).Draw(t, "segments"); i < n || i == 0; i++ {
		sb.WriteString("/")
		if i < n {
			sb.WriteString(take("segment", goodSegments, badSegments))
		}
	}
	if rapid.Bool().Draw(t, "query?") {
		sb.WriteString("?" + take("query", goodQueries, badQueries))
	}
	sb.WriteString(" " + take("proto", goodProtos, badProtos) + eol)
	header := func(name, value string) {
		sb.WriteString(name + take("sep", goodSeparator, badSeparator) + value + eol)
	}
	hosts := 1
	if hostile && rapid.IntRange(0, 5).Draw(t, "hosts-bad?") == 0 {
		hosts, bad = rapid.SampledFrom([]int{0, 2}).Draw(t, "hosts"), true
	}
	bodyLen := 0
	order := rapid.Permutation([]string{"host", "length", "conn", "more"}).Draw(t, "order")
	for _, what := range order {
		switch what {
		case "host":
			for i := 0; i < hosts; i++ {
				header(rapid.SampledFrom([]string{"Host", "host", "HOST"}).Draw(t, "host-name"),
					take("host", goodHosts, badHosts))
			}
		case "length":
			if rapid.Bool().Draw(t, "length?") {
				l := take("length", goodLengths, badLengths)
				header("Content-Length", l)
				if n, err := strconv.Atoi(strings.TrimSpace(l)); err == nil && n >= 0 && n < 100 {
					bodyLen = n
				}
				if hostile && rapid.IntRange(0, 5).Draw(t, "length-twice?") == 0 {
					header("Content-Length", l)
					bad = true
				}
			}
		case "conn":
			if rapid.IntRange(0, 3).Draw(t, "conn?") == 0 {
				header("Connection", take("conn", goodConns, badConns))
			}
		case "more":
			for i, n := 0, rapid.IntRange(0, 4).Draw(t, "headers"); i < n; i++ {
				header(take("name", goodNames, badNames), take("value", goodValues, badValues))
			}
		}
	}
	sb.WriteString(eol)
	sb.WriteString(strings.Repeat("b", bodyLen))
	return sb.String(), bad
}

// TestLeanParseAgrees: every request the lean loop accepts, net/http's
// server accepts too and hands its handler the same method, URL, host,
// headers, length and body; and every request drawn from well-formed
// pieces only is accepted (so the lean loop is what serves ordinary
// clients). Requests mix well-formed pieces with what hostile clients send.
func TestLeanParseAgrees(t *testing.T) {
	got := make(chan seenRequest, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen(r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s := &Server{opts: config.Defaults()}

	accepted := 0
	rapid.Check(t, func(t *rapid.T) {
		raw, bad := genRequest(t)
		lc := &leanConn{s: s}
		head, body, ok := strings.Cut(raw, "\r\n\r\n")
		leanOK := ok && lc.parse([]byte(head+"\r\n\r\n"))
		if !bad && !leanOK {
			t.Fatalf("well-formed request refused: %q", raw)
		}
		if !leanOK {
			return
		}
		accepted++
		lc.buf, lc.w = []byte(body), len(body)
		lean := seen(&lc.req)

		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("net/http did not answer %q: %v", raw, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("lean loop accepted %q, net/http answered %d", raw, res.StatusCode)
		}
		nh := <-got
		if !reflect.DeepEqual(lean, nh) {
			t.Fatalf("%q:\nlean     %+v\nnet/http %+v", raw, lean, nh)
		}
	})
	if accepted == 0 {
		t.Error("no request was accepted")
	}
}

// rawConn is a client connection that sends raw requests and reads the
// answers, reconnecting after an answer that closes it.
type rawConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
	last string
}

// fataler is what rawConn needs of a *testing.T or a *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func (rc *rawConn) do(t fataler, method, raw string) *http.Response {
	if rc.c == nil {
		c, err := net.Dial("tcp", rc.addr)
		if err != nil {
			t.Fatal(err)
		}
		rc.c, rc.br = c, bufio.NewReader(c)
	}
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(rc.c, raw); err != nil {
		t.Fatalf("%s: %q: %v (last answer %q)", rc.addr, raw, err, rc.last)
	}
	res, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	for err == nil && res.StatusCode == http.StatusContinue {
		res, err = http.ReadResponse(rc.br, &http.Request{Method: method})
	}
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%q: body: %v", raw, err)
	}
	res.Body = io.NopCloser(strings.NewReader(string(b)))
	rc.last = fmt.Sprint(res.Proto, res.StatusCode, res.Header, string(b))
	if res.Close {
		rc.c.Close()
		rc.c = nil
	}
	return res
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	ageRE  = regexp.MustCompile(`"age": ?\d+|"created": ?"[^"]*"`)
)

// answer is a response with what differs between two servers by chance
// (ids, ages, dates) taken out, and net/http's framing choices (chunked or
// not) left aside.
func answer(res *http.Response) string {
	b, _ := io.ReadAll(res.Body)
	body := ageRE.ReplaceAllString(uuidRE.ReplaceAllString(string(b), "ID"), `"time"`)
	var keys []string
	for k, vs := range res.Header {
		switch k {
		case "Date", "Content-Length", "X-Openstack-Request-Id":
			continue
		}
		keys = append(keys, k+"="+uuidRE.ReplaceAllString(strings.Join(vs, ","), "ID"))
	}
	slices.Sort(keys)
	return strconv.Itoa(res.StatusCode) + " close=" + strconv.FormatBool(res.Close) + " " + strings.Join(keys, " ") + "\n" + body
}

// TestLeanAndNetHTTPAnswerAlike: the same requests, one after another on a
// keep-alive connection, get the same answers from a server with the lean
// loop and one without (net/http only): statuses, headers, Zaqar error
// bodies and stored messages. The requests mix the API's common calls
// with what the lean loop hands to net/http (chunked bodies, Expect,
// HTTP/1.0, HEAD, OPTIONS, Connection: close) and with broken ones, so a
// connection also carries on in net/http after a handover.
func TestLeanAndNetHTTPAnswerAlike(t *testing.T) {
	lean := startServer(t, func(o *config.Options) { o.LeanHTTP = true })
	plain := startServer(t, func(o *config.Options) { o.LeanHTTP = false })
	t.Logf("lean %s, net/http %s", lean.base, plain.base)
	rapid.Check(t, func(t *rapid.T) {
		queue := "q" + strconv.Itoa(rapid.IntRange(0, 1<<30).Draw(t, "queue"))
		conns := []*rawConn{{addr: strings.TrimPrefix(lean.base, "http://")}, {addr: strings.TrimPrefix(plain.base, "http://")}}
		defer func() {
			for _, rc := range conns {
				if rc.c != nil {
					rc.c.Close()
				}
			}
		}()
		for i, n := 0, rapid.IntRange(1, 12).Draw(t, "requests"); i < n; i++ {
			method, raw := genAPIRequest(t, queue)
			a, b := answer(conns[0].do(t, method, raw)), answer(conns[1].do(t, method, raw))
			if a != b {
				t.Fatalf("%q:\nlean:     %s\nnet/http: %s", raw, a, b)
			}
		}
	})
}

// genAPIRequest draws one request on queue: its method and its bytes.
func genAPIRequest(t *rapid.T, queue string) (string, string) {
	post := `{"messages":[{"ttl":300,"body":{"n":1}},{"body":"x","delay":0}]}`
	// Three 8 KiB messages: a listing after them is an answer larger than
	// the lean loop copies behind its head.
	big := `{"body":"` + strings.Repeat("b", 8<<10) + `"}`
	bigPost := `{"messages":[` + big + "," + big + "," + big + `]}`
	type call struct{ method, path, body string }
	c := rapid.SampledFrom([]call{
		{"POST", "/v2/queues/Q/messages", post},
		{"POST", "/v2/queues/Q/messages", bigPost},
		{"POST", "/v2/queues/Q/messages", `{"messages":[]}`},
		{"POST", "/v2/queues/Q/messages", `{"messages":[{"ttl":10,"body":1}]}`},
		{"POST", "/v2/queues/Q/messages", `{"messages":[{"body":1}]`},
		{"GET", "/v2/queues/Q/messages?echo=true", ""},
		{"GET", "/v2/queues/Q/messages?limit=0", ""},
		{"POST", "/v2/queues/Q/claims?limit=1", `{"ttl":60,"grace":60}`},
		{"POST", "/v2/queues/Q/claims", `{"ttl":"x"}`},
		{"GET", "/v2/queues/Q/stats", ""},
		{"PUT", "/v2/queues/Q", `{"_default_message_ttl":120}`},
		{"PATCH", "/v2/queues/Q", `[{"op":"replace","path":"/metadata/a","value":1}]`},
		{"DELETE", "/v2/queues/Q/messages?pop=1", ""},
		{"DELETE", "/v2/queues/Q/messages/0000?claim_id=x", ""},
		{"GET", "/v2/queues/Q/../Q/stats", ""},
		{"GET", "/v2/queues/bad%20name/stats", ""},
		{"GET", "/v2/nothing", ""},
		{"HEAD", "/v2/queues/Q/stats", ""},
		{"OPTIONS", "/v2/queues/Q/messages", ""},
		{"GET", "/v2/queues/Q", ""},
		{"DELETE", "/v2/queues/Q", ""},
	}).Draw(t, "call")
	path := strings.ReplaceAll(c.path, "Q", queue)
	var sb strings.Builder
	proto := rapid.SampledFrom([]string{"HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0"}).Draw(t, "proto")
	sb.WriteString(c.method + " " + path + " " + proto + "\r\nHost: sluice\r\n")
	headers := map[string]string{"Client-ID": testClient, "X-Project-ID": "p1", "Content-Type": "application/json",
		"Accept": "application/json"}
	switch rapid.IntRange(0, 9).Draw(t, "header fault") {
	case 0:
		delete(headers, "Client-ID")
	case 1:
		headers["Client-ID"] = "not-a-uuid"
	case 2:
		headers["Accept"] = "text/plain"
	case 3:
		headers["Content-Type"] = "text/plain"
	case 4:
		delete(headers, "X-Project-ID")
	}
	for _, k := range []string{"Client-ID", "X-Project-ID", "Content-Type", "Accept"} {
		if v, ok := headers[k]; ok {
			sb.WriteString(k + ": " + v + "\r\n")
		}
	}
	if proto == "HTTP/1.0" {
		sb.WriteString("Connection: keep-alive\r\n")
	} else if rapid.IntRange(0, 9).Draw(t, "close?") == 0 {
		sb.WriteString("Connection: close\r\n")
	}
	body := c.body
	switch {
	case body != "" && proto == "HTTP/1.1" && rapid.IntRange(0, 4).Draw(t, "chunked?") == 0:
		half := len(body) / 2
		sb.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		sb.WriteString(strconv.FormatInt(int64(half), 16) + "\r\n" + body[:half] + "\r\n")
		sb.WriteString(strconv.FormatInt(int64(len(body)-half), 16) + "\r\n" + body[half:] + "\r\n0\r\n\r\n")
	case body != "" && proto == "HTTP/1.1" && rapid.IntRange(0, 4).Draw(t, "expect?") == 0:
		sb.WriteString("Expect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	default:
		sb.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	return c.method, sb.String()
}

// TestSlowClientsAreCut: with the lean loop as with net/http, a head that
// stops arriving, a head trickled a byte at a time, and a keep-alive
// connection left idle are all closed by the server within their timeout
// (and a margin), not held open.
func TestSlowClientsAreCut(t *testing.T) {
	const headerTimeout, idleTimeout = 300 * time.Millisecond, 600 * time.Millisecond
	for _, lean := range []bool{true, false} {
		t.Run("lean="+strconv.FormatBool(lean), func(t *testing.T) {
			ts := startServer(t, func(o *config.Options) {
				o.LeanHTTP = lean
				o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = headerTimeout, 2*time.Second, idleTimeout
			})
			addr := strings.TrimPrefix(ts.base, "http://")
			request := "GET /v2/queues/q/stats HTTP/1.1\r\nHost: x\r\nClient-ID: " + testClient + "\r\nX-Project-ID: p1\r\n\r\n"
			// closedWithin sends what send sends on a new connection and
			// reports how long the server took to close it (reading and
			// dropping any answer), failing past bound.
			closedWithin := func(name string, bound time.Duration, send func(net.Conn)) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				start := time.Now()
				c.SetReadDeadline(start.Add(bound + 2*time.Second))
				go send(c)
				_, err = io.Copy(io.Discard, c)
				if took := time.Since(start); err != nil || took > bound {
					t.Errorf("%s: closed after %v (bound %v), err %v", name, took, bound, err)
				}
			}
			closedWithin("head stops", headerTimeout+time.Second, func(c net.Conn) {
				io.WriteString(c, request[:20])
			})
			closedWithin("head trickles", headerTimeout+time.Second, func(c net.Conn) {
				for i := 0; i < 30; i++ {
					if _, err := io.WriteString(c, request[i:i+1]); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
			closedWithin("idle after an answer", idleTimeout+time.Second, func(c net.Conn) {
				io.WriteString(c, request)
			})
		})
	}
}

// TestHandoversCounted: sluice_http_handovers_total counts the connections
// the lean loop gives to net/http, and only those: plain requests on a
// connection leave it alone, a chunked body or an HTTP/1.0 request hands
// their connection over; with the loop off, every connection counts.
func TestHandoversCounted(t *testing.T) {
	for _, lean := range []bool{true, false} {
		t.Run("lean="+strconv.FormatBool(lean), func(t *testing.T) {
			s := newTestServer(t, func(o *config.Options) { o.LeanHTTP = lean })
			mh := s.m.Handler()
			s.Handle("GET", "/metrics", Public, func(w http.ResponseWriter, r *http.Request, _ *Call) { mh.ServeHTTP(w, r) })
			ts := serve(t, s)
			addr := strings.TrimPrefix(ts.base, "http://")
			head := "Host: x\r\nClient-ID: " + testClient + "\r\nX-Project-ID: p1\r\nContent-Type: application/json\r\n"
			post := `{"messages":[{"body":1}]}`
			// The count, read as a scrape would over HTTP (a connection of
			// its own, which net/http serves when the loop is off).
			handovers := func() string {
				res, err := http.Get(ts.base + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				m := regexp.MustCompile(`(?m)^sluice_http_handovers_total (\d+)$`).FindStringSubmatch(string(b))
				if m == nil {
					t.Fatalf("no sluice_http_handovers_total in\n%s", b)
				}
				return m[1]
			}
			before, _ := strconv.Atoi(handovers())
			rc := &rawConn{addr: addr}
			send := func(method, raw string, status int) {
				if res := rc.do(t, method, raw); res.StatusCode != status {
					t.Fatalf("%q: %d", raw, res.StatusCode)
				}
			}
			send("POST", "POST /v2/queues/h/messages HTTP/1.1\r\n"+head+"Content-Length: "+strconv.Itoa(len(post))+"\r\n\r\n"+post, 201)
			send("GET", "GET /v2/queues/h/stats HTTP/1.1\r\n"+head+"\r\n", 200)
			if got := handovers(); lean && got != strconv.Itoa(before) {
				t.Fatalf("after plain requests: %s handovers, want %d", got, before)
			}
			send("POST", "POST /v2/queues/h/messages HTTP/1.1\r\n"+head+"Transfer-Encoding: chunked\r\n\r\n"+
				strconv.FormatInt(int64(len(post)), 16)+"\r\n"+post+"\r\n0\r\n\r\n", 201)
			send("GET", "GET /v2/queues/h/stats HTTP/1.1\r\n"+head+"\r\n", 200)
			rc.c.Close()
			http.DefaultClient.CloseIdleConnections()
			// The lean loop hands over the raw connection once, at its
			// chunked post, and none of the /metrics reads' connections.
			// Without it net/http serves every connection: the raw one and
			// the last /metrics read's.
			want := before + 1
			if !lean {
				want = before + 2
			}
			if got := handovers(); got != strconv.Itoa(want) {
				t.Errorf("handovers %s, want %d", got, want)
			}
		})
	}
}

// FuzzLeanParse: any head the lean loop accepts, net/http's request
// parser reads the same way (TestLeanParseAgrees draws heads from known
// pieces; this explores raw bytes).
func FuzzLeanParse(f *testing.F) {
	f.Add([]byte("POST /v2/queues/q/messages?x=1 HTTP/1.1\r\nHost: h:80\r\nContent-Length: 2\r\nClient-ID: x\r\n\r\n"))
	f.Add([]byte("GET /v2/queues HTTP/1.1\r\nhost: h\r\nConnection: keep-alive\r\nA: b\r\na: c\r\n\r\n"))
	f.Add([]byte("DELETE /v2/queues/q/messages/m?claim_id=c HTTP/1.1\r\nHost: [::1]\r\nX:\t v \r\n\r\n"))
	s := &Server{opts: config.Defaults()}
	f.Fuzz(func(t *testing.T, head []byte) {
		end := bytes.Index(head, crlfcrlf)
		if end < 0 {
			return
		}
		head = head[:end+4]
		lc := &leanConn{s: s}
		if !lc.parse(head) {
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("lean accepted %q, net/http: %v", head, err)
		}
		// The head has no body behind it; compare the rest.
		lc.req.Body, r.Body = http.NoBody, http.NoBody
		lean, nh := seen(&lc.req), seen(r)
		if !reflect.DeepEqual(lean, nh) {
			t.Fatalf("%q:\nlean     %+v\nnet/http %+v", head, lean, nh)
		}
	})
}
