package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

// Zaqar's fixed lower bounds (seconds).
const (
	minMessageTTL = 60
	minClaimTTL   = 60
	minClaimGrace = 60
	maxDelay      = 900
)

var (
	errUnparsable  = badBody("Request body could not be parsed.")
	errDocType     = badBody("Document type not supported.")
	errNoMessages  = badRequest("No messages were found in the request body.")
	errEmptyPost   = badRequest("No messages to enqueu.")
	errMissingBody = badBody(`Missing "body" field.`)
)

// readBody reads the request body into the request's reusable buffer,
// refusing more than max-body-bytes with 413 before or while reading.
func (s *Server) readBody(r *http.Request, rw *respWriter) ([]byte, *apiError) {
	return readBodyUpTo(r, rw, s.opts.MaxBodyBytes, nil)
}

// readMetadataBody reads a queue PUT or PATCH body, which Zaqar bounds by
// max_queue_metadata (checked on Content-Length before reading; here also
// while reading, so a body without one cannot run past it either). Zaqar
// titles the PUT answer "Invalid API request", the PATCH one "Invalid
// request body".
func (s *Server) readMetadataBody(r *http.Request, rw *respWriter, patch bool) ([]byte, *apiError) {
	e := badRequest("Queue metadata is too large. Max size: " + strconv.Itoa(s.opts.MaxQueueMetadata))
	if patch {
		e.title = errUnparsable.title
	}
	return readBodyUpTo(r, rw, int64(s.opts.MaxQueueMetadata), e)
}

var errBodyTimeout = &apiError{http.StatusRequestTimeout, "Request timeout",
	"The request body was not received in time."}

// readBodyUpTo reads at most limit bytes; over (nil: 413) answers a body
// that is larger. A body that stops arriving runs into the listener's read
// timeout and gets 408.
func readBodyUpTo(r *http.Request, rw *respWriter, limit int64, over *apiError) ([]byte, *apiError) {
	// The 413 is built only when it is answered: most bodies fit.
	overLimit := func() *apiError {
		if over == nil {
			return tooLarge(limit)
		}
		return over
	}
	if r.ContentLength > limit {
		return nil, overLimit()
	}
	buf := rw.in[:0]
	if r.ContentLength > 0 && int64(cap(buf)) < r.ContentLength {
		buf = make([]byte, 0, r.ContentLength)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			rw.in = buf[:0]
			return nil, overLimit()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			rw.in = buf[:0]
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, overLimit()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, errBodyTimeout
			}
			return nil, badBody("Request body could not be read.")
		}
	}
	rw.in = buf
	return buf, nil
}

func tooLarge(limit int64) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, "Request entity too large",
		"The request body may not exceed " + strconv.FormatInt(limit, 10) + " bytes."}
}

// jsonInt reads a JSON integer the way Zaqar's isinstance(v, int) sees it:
// no fraction, no exponent, no booleans, no strings.
func jsonInt(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || len(raw) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

func typeErr(field string) *apiError {
	return badBody(`The value of the "` + field + `" field must be a int.`)
}

// decodeErr classifies a json.Unmarshal failure as Zaqar would answer it.
func decodeErr(err error) *apiError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errUnparsable
	}
	return errDocType
}

type postedMessage struct {
	TTL       json.RawMessage
	Delay     json.RawMessage
	Body      json.RawMessage
	notObject bool // the item is not a JSON object
}

// messageLimits are the server-wide bounds a post is checked against.
type messageLimits struct {
	maxTTL time.Duration
}

// parsePostMessages validates a message batch as Zaqar does: size against the
// queue's limit before parsing, then each message in turn (an object, its
// ttl's type, its body, its delay's type), then ranges.
// Bodies are copied out of the request buffer.
func parsePostMessages(body []byte, qs queueSettings, lim messageLimits) ([]storage.NewMessage, *apiError) {
	if len(body) > qs.maxPostSize {
		return nil, badRequest("Message collection size is too large. Max size " + strconv.Itoa(qs.maxPostSize))
	}
	posted, fast := decodePostFast(body)
	if fast {
		posted = copyBodies(posted)
	} else {
		if e := checkJSON(body); e != nil {
			return nil, e
		}
		if body[skipWS(body, 0)] == '[' {
			return nil, errNoMessages
		}
		var e *apiError
		if posted, e = decodePostSlow(body); e != nil {
			return nil, e
		}
	}
	if len(posted) == 0 {
		return nil, errEmptyPost
	}
	out := make([]storage.NewMessage, len(posted))
	ttls := make([]int64, len(posted))
	delays := make([]int64, len(posted))
	for i := range posted {
		p := &posted[i]
		if p.notObject {
			return nil, errDocType
		}
		ttls[i] = int64(qs.ttl / time.Second)
		// A null ttl or delay is a type error, as in Zaqar (None is no int).
		if p.TTL != nil {
			n, ok := jsonInt(p.TTL)
			if !ok {
				return nil, typeErr("ttl")
			}
			ttls[i] = n
		}
		if p.Body == nil {
			return nil, errMissingBody
		}
		delays[i] = int64(qs.delay / time.Second)
		if p.Delay != nil {
			n, ok := jsonInt(p.Delay)
			if !ok {
				return nil, typeErr("delay")
			}
			delays[i] = n
		}
	}
	maxTTL := int64(lim.maxTTL / time.Second)
	for i := range posted {
		if ttls[i] < minMessageTTL || ttls[i] > maxTTL {
			return nil, badRequest("The TTL for a message may not exceed " + strconv.FormatInt(maxTTL, 10) +
				" seconds, and must be at least 60 seconds long.")
		}
		if delays[i] < 0 || delays[i] > maxDelay {
			return nil, badRequest("The Delay TTL for a message may not exceed 900 seconds,and must be at least 0 seconds long.")
		}
		out[i] = storage.NewMessage{
			TTL:   time.Duration(ttls[i]) * time.Second,
			Delay: time.Duration(delays[i]) * time.Second,
			Body:  posted[i].Body,
			// Sealed by the storage layer's encryption wrapper.
			Encrypt: qs.encrypt,
		}
	}
	return out, nil
}

// copyBodies moves the message bodies out of the reusable request buffer
// into one allocation.
func copyBodies(posted []postedMessage) []postedMessage {
	n := 0
	for i := range posted {
		n += len(posted[i].Body)
	}
	buf := make([]byte, 0, n)
	for i := range posted {
		if b := posted[i].Body; b != nil {
			start := len(buf)
			buf = append(buf, b...)
			posted[i].Body = buf[start:len(buf):len(buf)]
		}
	}
	return posted
}

// claimLimits are the bounds and defaults of claim bodies.
type claimLimits struct {
	defTTL, defGrace time.Duration
	maxTTL, maxGrace time.Duration
	// limitFault is what is wrong with a new claim's ?limit, if anything:
	// Zaqar reports it after the body's types and the ttl's range, before
	// the grace's.
	limitFault *apiError
}

// parseClaimBody reads {"ttl", "grace"} of a claim create or update. Both
// fields default to the configured claim ttl and grace, as in Zaqar, where
// `PATCH .../claims/{id}` with `{}` renews with 300 and 60. Only a create
// may have no body at all (Zaqar parses an update's body unconditionally).
func parseClaimBody(body []byte, lim claimLimits, update bool) (ttl, grace time.Duration, e *apiError) {
	ttlS, graceS := int64(lim.defTTL/time.Second), int64(lim.defGrace/time.Second)
	if len(bytes.TrimSpace(body)) == 0 {
		if update {
			return 0, 0, errUnparsable
		}
		if lim.limitFault != nil {
			return 0, 0, lim.limitFault
		}
		return lim.defTTL, lim.defGrace, nil
	}
	if e := checkJSON(body); e != nil {
		return 0, 0, e
	}
	ttlRaw, graceRaw, ok := claimFieldsFast(body)
	if !ok {
		var e *apiError
		if ttlRaw, graceRaw, e = claimFieldsSlow(body); e != nil {
			return 0, 0, e
		}
	}
	if ttlRaw != nil {
		n, ok := jsonInt(ttlRaw)
		if !ok {
			return 0, 0, typeErr("ttl")
		}
		ttlS = n
	}
	if graceRaw != nil {
		n, ok := jsonInt(graceRaw)
		if !ok {
			return 0, 0, typeErr("grace")
		}
		graceS = n
	}
	maxTTL, maxGrace := int64(lim.maxTTL/time.Second), int64(lim.maxGrace/time.Second)
	if ttlS < minClaimTTL || ttlS > maxTTL {
		return 0, 0, badRequest("The TTL for a claim may not exceed " + strconv.FormatInt(maxTTL, 10) +
			" seconds, and must be at least 60 seconds long.")
	}
	if lim.limitFault != nil {
		return 0, 0, lim.limitFault
	}
	// Zaqar checks the grace of a new claim only; an update may shorten it.
	minGrace := int64(minClaimGrace)
	if update {
		minGrace = 0
	}
	if graceS < minGrace || graceS > maxGrace {
		return 0, 0, badRequest("The grace for a claim may not exceed " + strconv.FormatInt(maxGrace, 10) +
			" seconds, and must be at least " + strconv.FormatInt(minGrace, 10) + " seconds long.")
	}
	return time.Duration(ttlS) * time.Second, time.Duration(graceS) * time.Second, nil
}

// claimFieldsSlow reads a claim body's "ttl" and "grace" (nil when absent)
// with encoding/json. body has passed checkJSON.
func claimFieldsSlow(body []byte) (ttl, grace json.RawMessage, e *apiError) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, nil, decodeErr(err)
	}
	if doc == nil {
		return nil, nil, errDocType
	}
	return doc["ttl"], doc["grace"], nil
}

// claimFieldsFast reads the same fields in one pass over an object whose
// keys have no escapes, without the map encoding/json builds: a claim is
// half of every claim+delete cycle (docs/benchmarks.md). A repeated key
// keeps its last value, as in the map. Anything else returns ok=false for
// claimFieldsSlow. body has passed checkJSON, so every value is valid.
func claimFieldsFast(body []byte) (ttl, grace []byte, ok bool) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, nil, false
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil, nil, true
	}
	for i < len(body) {
		key, j, ok := scanKey(body, i)
		if !ok {
			return nil, nil, false
		}
		j = skipWS(body, j)
		end, f := skipValue(body, j, 0, maxCheckDepth)
		if f != jsonOK {
			return nil, nil, false
		}
		switch string(key) {
		case "ttl":
			ttl = body[j:end]
		case "grace":
			grace = body[j:end]
		}
		i = skipWS(body, end)
		if i < len(body) && body[i] == '}' {
			return ttl, grace, true
		}
		if i >= len(body) || body[i] != ',' {
			return nil, nil, false
		}
		i = skipWS(body, i+1)
	}
	return nil, nil, false
}

// parseJSONDocument decodes a JSON body keeping numbers exact (json.Number),
// so integers stay integers in stored metadata.
func parseJSONDocument(body []byte) (any, *apiError) {
	if e := checkJSON(body); e != nil {
		return nil, e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errUnparsable
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errUnparsable
	}
	return v, nil
}
