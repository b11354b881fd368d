package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sluice.dev/server/internal/storage"
)

// reservedKeys are the metadata keys every queue answers with, in Zaqar's
// order, filled with defaults when a queue does not set them.
var reservedKeys = []string{
	"_max_messages_post_size", "_default_message_ttl", "_default_message_delay",
	"_dead_letter_queue", "_dead_letter_queue_messages_ttl", "_max_claim_count",
	"_enable_encrypt_messages",
}

// topicReservedKeys are those a topic answers with: Zaqar's topics know no
// claims, dead letters or encryption.
var topicReservedKeys = reservedKeys[:3]

func isReserved(key string, reserved []string) bool {
	for _, k := range reserved {
		if k == key {
			return true
		}
	}
	return false
}

// reservedDefault is the value shown for a reserved key a queue does not set.
func (s *Server) reservedDefault(key string) any {
	switch key {
	case "_max_messages_post_size":
		return s.opts.MaxMessagesPostSize
	case "_default_message_ttl":
		return int64(s.opts.DefaultMessageTTL.Seconds())
	case "_default_message_delay":
		return 0
	case "_enable_encrypt_messages":
		return false
	}
	return nil
}

// appendMetadata encodes a queue's metadata: its own keys, then the reserved
// keys it leaves unset (or null) with their defaults.
func (s *Server) appendMetadata(b []byte, meta storage.Metadata) ([]byte, error) {
	return s.appendMetadataOf(b, meta, reservedKeys)
}

// appendMetadataOf is appendMetadata with the reserved keys of a queue or
// of a topic.
func (s *Server) appendMetadataOf(b []byte, meta storage.Metadata, reserved []string) ([]byte, error) {
	keys := make([]string, 0, len(meta))
	for k, v := range meta {
		if v == nil && isReserved(k, reserved) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, '{')
	n := 0
	var err error
	field := func(k string, v any) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, k)
		b = append(b, ':')
		if err == nil {
			b, err = appendAny(b, v)
		}
	}
	for _, k := range keys {
		field(k, meta[k])
	}
	for _, k := range reserved {
		if v := meta[k]; v == nil {
			field(k, s.reservedDefault(k))
		}
	}
	return append(b, '}'), err
}

// validateMetadata applies Zaqar's queue_metadata_putting checks to the
// reserved keys. The message says what is wrong; callers pick the title.
func (s *Server) validateMetadata(meta storage.Metadata) string {
	maxTTL := int64(s.opts.MaxMessageTTL.Seconds())
	ttlRange := func(v int64) bool { return v >= minMessageTTL && v <= maxTTL }
	check := func(key string, ok func(int64) bool, rangeMsg string) string {
		v, present := meta[key]
		if !present || v == nil {
			return ""
		}
		n, isInt := metaInt(v)
		if isJSONFloat(v) {
			return key + " must be integer."
		}
		if num, isNum := v.(json.Number); isNum && !isInt {
			// An integer beyond int64 is an integer out of range.
			if _, err := strconv.ParseFloat(string(num), 64); err == nil || errors.Is(err, strconv.ErrRange) {
				return rangeMsg
			}
		}
		if !isInt {
			return key + " must be integer."
		}
		if !ok(n) {
			return rangeMsg
		}
		return ""
	}
	maxPost := int64(s.opts.MaxMessagesPostSize)
	if m := check("_default_message_ttl", ttlRange, "_default_message_ttl can not exceed "+
		strconv.FormatInt(maxTTL, 10)+" seconds, and must be at least 60 seconds long."); m != "" {
		return m
	}
	if m := check("_max_messages_post_size", func(n int64) bool { return n > 0 && n <= maxPost },
		"_max_messages_post_size can not exceed "+strconv.FormatInt(maxPost, 10)+", and must be at least greater than 0."); m != "" {
		return m
	}
	if m := check("_max_claim_count", func(n int64) bool { return n >= 0 },
		"_max_claim_count must be at least 0."); m != "" {
		return m
	}
	if m := check("_dead_letter_queue_messages_ttl", ttlRange, "The TTL for a message may not exceed "+
		strconv.FormatInt(maxTTL, 10)+" seconds, and must be at least 60 seconds long."); m != "" {
		return m
	}
	if m := check("_default_message_delay", func(n int64) bool { return n >= 0 && n <= maxDelay },
		"The TTL can not exceed 900 seconds, and must be at least 0 seconds long."); m != "" {
		return m
	}
	if v, ok := meta["_dead_letter_queue"]; ok && v != nil {
		name, isStr := v.(string)
		if !isStr || !validQueueName(name) {
			return "_dead_letter_queue must be a valid queue name."
		}
	}
	if v, ok := meta["_enable_encrypt_messages"]; ok && v != nil {
		on, isBool := v.(bool)
		if !isBool {
			return "_enable_encrypt_messages must be boolean."
		}
		if on && s.keys == nil {
			return descEncryptNeedsKey
		}
	}
	return ""
}

func isJSONFloat(v any) bool {
	n, ok := v.(json.Number)
	return ok && strings.ContainsAny(string(n), ".eE")
}

// parseQueueMetadata reads a queue PUT body: nothing, or a JSON object no
// larger than max-queue-metadata.
func (s *Server) parseQueueMetadata(body []byte) (storage.Metadata, *apiError) {
	if len(body) == 0 {
		return nil, nil
	}
	if len(body) > s.opts.MaxQueueMetadata {
		return nil, badRequest("Queue metadata is too large. Max size: " + strconv.Itoa(s.opts.MaxQueueMetadata))
	}
	v, e := parseJSONDocument(body)
	if e != nil {
		return nil, e
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errDocType
	}
	meta := storage.Metadata(m)
	if msg := s.validateMetadata(meta); msg != "" {
		return nil, badRequest(msg)
	}
	return meta, nil
}

// patchOp is one validated JSON-patch operation on /metadata/<key>.
type patchOp struct {
	op    string
	key   string
	value any
}

const patchMediaType = "application/openstack-messaging-v2.0-json-patch"

var errPatchMedia = &apiError{http.StatusUnsupportedMediaType, "415 Unsupported Media Type",
	"Accepted media type for PATCH: {'Accept-Patch': '" + patchMediaType + "'}."}

// parsePatch validates a queue PATCH body: a JSON array of add, remove and
// replace operations whose paths are /metadata/<key>.
func parsePatch(body []byte) ([]patchOp, *apiError) {
	if len(body) == 0 {
		return nil, badBody("PATCH body could not be empty for update.")
	}
	v, e := parseJSONDocument(body)
	if e != nil {
		return nil, e
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errDocType
	}
	ops := make([]patchOp, 0, len(list))
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, badBody("Operations must be JSON objects.")
		}
		rawOp, has := obj["op"]
		if !has || rawOp == nil {
			return nil, badBody("Unable to find `op` in JSON Schema change. It must be one of the following: add, remove, replace.")
		}
		op, _ := rawOp.(string)
		if op != "add" && op != "remove" && op != "replace" {
			return nil, badBody("Invalid operation: `" + strings.TrimSpace(jsonText(obj["op"])) +
				"`. It must be one of the following: add, remove, replace.")
		}
		path, ok := obj["path"].(string)
		if !ok {
			return nil, badBody("Unable to find 'path' in JSON Schema change")
		}
		if fault := pointerFault(path); fault != "" {
			return nil, badBody(fault)
		}
		key, ok := metadataPointer(path)
		if !ok {
			if root, rest, two := strings.Cut(path[1:], "/"); two && op != "remove" && !strings.Contains(rest, "/") &&
				!strings.EqualFold(root, "metadata") {
				return nil, badBody("The root of path must be metadata, e.g /metadata/key.")
			}
			return nil, badBody(`Invalid JSON pointer for this resource: "` + path + `", e.g /metadata/key`)
		}
		value, has := obj["value"]
		if op != "remove" && !has {
			return nil, badBody(`Operation "` + op + `" requires a member named "value".`)
		}
		ops = append(ops, patchOp{op: op, key: key, value: value})
	}
	return ops, nil
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// metadataPointer decodes the JSON pointer /metadata/<key> (RFC 6901 escapes).
// pointerFault words what makes p no JSON pointer, as Zaqar's
// _validate_json_pointer does, in its order ("" when p is one).
func pointerFault(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "Pointer `" + p + "` does not start with \"/\"."
	case adjacentSlashes.MatchString(p[1:]):
		return "Pointer `" + p + "` contains adjacent \"/\"."
	case len(p) > 1 && strings.HasSuffix(p, "/"):
		return "Pointer `" + p + "` end with \"/\"."
	case badEscape.MatchString(p) || strings.HasSuffix(p, "~"):
		return "Pointer `" + p + "` contains \"~\" not part of a recognized escape sequence."
	}
	return ""
}

var (
	adjacentSlashes = regexp.MustCompile(`/\s*/`)
	badEscape       = regexp.MustCompile(`~[^01]`)
)

func metadataPointer(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/metadata/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	rest = strings.ReplaceAll(rest, "~1", "/")
	rest = strings.ReplaceAll(rest, "~0", "~")
	return rest, true
}

// applyPatch changes meta in place with Zaqar's semantics: replace and
// remove of a key that is neither set nor reserved is a conflict.
func applyPatch(meta storage.Metadata, ops []patchOp) *apiError {
	return applyPatchOf(meta, ops, reservedKeys)
}

// applyPatchOf is applyPatch where reserved are the keys that may be
// replaced or removed while unset.
func applyPatchOf(meta storage.Metadata, ops []patchOp, reserved []string) *apiError {
	for _, op := range ops {
		_, present := meta[op.key]
		switch op.op {
		case "add":
			meta[op.key] = op.value
		case "replace":
			if !present && !isReserved(op.key, reserved) {
				return &apiError{http.StatusConflict, "Resource conflict", "Can't replace non-existent object " + op.key + "."}
			}
			meta[op.key] = op.value
		case "remove":
			if !present && !isReserved(op.key, reserved) {
				return &apiError{http.StatusConflict, "Resource conflict", "Can't remove non-existent object " + op.key + "."}
			}
			delete(meta, op.key)
		}
	}
	return nil
}
