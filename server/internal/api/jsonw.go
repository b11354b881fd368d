package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"sluice.dev/server/internal/jsontext"
)

// The hot answers (posted ids, message lists, claims) are appended to a byte
// slice by hand: no reflection, no intermediate maps, and message bodies are
// copied through as the raw JSON they were posted as.

const hexDigits = "0123456789abcdef"

// appendString and appendEscaped are jsontext's, under the short names the
// handlers use.
func appendString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }

func appendEscaped(b []byte, s string) []byte { return jsontext.AppendEscaped(b, s) }

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendAny marshals a value the slow way (metadata documents).
func appendAny(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// WriteJSON answers with a JSON document; it is exported for handlers added
// with Server.Handle.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Internal server error", "The answer could not be encoded.")
		return
	}
	writeRaw(w, status, b)
}

// writeRaw answers with an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = ctJSON
	w.WriteHeader(status)
	w.Write(body)
}

// writeEmpty answers with no body (201 with Location, 204).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}
