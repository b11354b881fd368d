package api

import (
	"sluice.dev/server/internal/config"
	"strings"
	"testing"
)

// TestRequestErrors replays the error cases of the recorded Zaqar 23.0.1
// responses: status, title and description must match.
func TestRequestErrors(t *testing.T) { forEachStore(t, testRequestErrors) }

func testRequestErrors(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "PUT", "/v2/queues/demo", std(), "")
	// Zaqar 23.0.1 takes dots in queue names, and a blank ids as none.
	ts.must(201, "PUT", "/v2/queues/orders.v1", std(), "")
	ts.must(201, "POST", "/v2/queues/orders.v1/messages", std(), `{"messages":[{"body":1}]}`)
	ts.must(200, "GET", "/v2/queues/orders.v1/messages?ids=&echo=true", std(), "")
	long := strings.Repeat("q", 65)
	cases := []struct {
		name, method, path string
		h                  hdr
		body               string
		status             int
		title, desc        string
	}{
		{"ping without headers", "GET", "/v2/ping", hdr{}, "", 400, "Missing header value", `The "Client-Id" header is required.`},
		{"client id not a uuid", "GET", "/v2/queues/demo/messages", std("Client-ID", "not-a-uuid"), "", 400, "Wrong UUID value", "Malformed hexadecimal UUID."},
		{"client id too short", "GET", "/v2/queues", std("Client-ID", "3381af922b9e11e3b19171861300734"), "", 400, "Wrong UUID value", "Malformed hexadecimal UUID."},
		{"empty project", "GET", "/v2/queues", std("X-Project-ID", ""), "", 400, "Empty project header not allowed", "X-PROJECT-ID cannot be an empty string. Specify the right header X-PROJECT-ID and retry."},
		{"no project", "GET", "/v2/queues", std("X-Project-ID", "<none>"), "", 400, "Project-Id Missing", "The header X-PROJECT-ID was missing"},
		{"project too long", "GET", "/v2/queues", std("X-Project-ID", strings.Repeat("p", 257)), "", 400, "Invalid queue identification", "The format of the submitted queue name or project id is not valid."},
		{"queue name of dots", "PUT", "/v2/queues/%2E%2E", std(), "", 400, "Invalid queue identification", "The format of the submitted queue name or project id is not valid."},
		{"bad queue name", "PUT", "/v2/queues/bad%20name!", std(), "", 400, "Invalid queue identification", "The format of the submitted queue name or project id is not valid."},
		{"queue name too long", "PUT", "/v2/queues/" + long, std(), "", 400, "Invalid queue identification", "The format of the submitted queue name or project id is not valid."},
		{"no trailing slash", "GET", "/v2", std(), "", 404, "404 Not Found", ""},
		{"unknown route", "GET", "/v2/nothing-here", std(), "", 404, "404 Not Found", ""},
		{"pools without pooling", "GET", "/v2/pools", std("X-Roles", "admin"), "", 404, "404 Not Found", ""},
		{"method not allowed", "POST", "/v2/queues/demo", std("Content-Type", "application/json"), "{}", 405, "405 Method Not Allowed", ""},
		{"form encoded, empty body", "PUT", "/v2/queues/formq", std("Content-Type", "application/x-www-form-urlencoded"), "", 400, "Invalid Content-Type", "Endpoint does not accept `application/x-www-form-urlencoded` content; currently supported media type is `application/json`; specify proper client-side media type with the \"Content-Type\" header."},
		{"form encoded", "POST", "/v2/queues/demo/messages", std("Content-Type", "application/x-www-form-urlencoded"), `{"messages":[{"body":1}]}`, 400, "Invalid Content-Type", "Endpoint does not accept `application/x-www-form-urlencoded` content; currently supported media type is `application/json`; specify proper client-side media type with the \"Content-Type\" header."},
		{"malformed json", "POST", "/v2/queues/demo/messages", std("Content-Type", "application/json"), `{"messages": [ {"body": `, 400, "Invalid request body", "Request body could not be parsed."},
		{"not wrapped", "POST", "/v2/queues/demo/messages", std(), `[{"body":1}]`, 400, "Invalid API request", "No messages were found in the request body."},
		{"messages not a list", "POST", "/v2/queues/demo/messages", std(), `{"messages":{"body":1}}`, 400, "Invalid request body", "Document type not supported."},
		{"message without body", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"ttl":60}]}`, 400, "Invalid request body", `Missing "body" field.`},
		{"ttl too small", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"ttl":1,"body":1}]}`, 400, "Invalid API request", "The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long."},
		{"ttl not an int", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"ttl":"60","body":1}]}`, 400, "Invalid request body", `The value of the "ttl" field must be a int.`},
		{"ttl a float", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"ttl":60.5,"body":1}]}`, 400, "Invalid request body", `The value of the "ttl" field must be a int.`},
		{"delay too large", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"delay":901,"body":1}]}`, 400, "Invalid API request", "The Delay TTL for a message may not exceed 900 seconds,and must be at least 0 seconds long."},
		{"empty messages", "POST", "/v2/queues/demo/messages", std(), `{"messages":[]}`, 400, "Invalid API request", "No messages to enqueu."},
		{"empty post body", "POST", "/v2/queues/demo/messages", std(), "", 400, "Invalid request body", "Request body could not be parsed."},
		{"unknown message", "GET", "/v2/queues/demo/messages/5c6939a8ef2f8e4a1c4a1a1a", std(), "", 404, "Not found", "Message 5c6939a8ef2f8e4a1c4a1a1a does not exist in queue demo for project p1"},
		{"malformed message id", "GET", "/v2/queues/demo/messages/xyz", std(), "", 404, "Not found", "Message xyz does not exist in queue demo for project p1"},
		// Zaqar looks the queue up before the message.
		{"message of a never created queue", "GET", "/v2/queues/ghost/messages/5c6939a8ef2f8e4a1c4a1a1a", std(), "", 404, "Not found", "Queue ghost does not exist for project p1"},
		{"message of a topic never created", "GET", "/v2/topics/ghost/messages/5c6939a8ef2f8e4a1c4a1a1a", std(), "", 404, "Not found", "Topic ghost does not exist for project p1"},
		{"unknown claim", "GET", "/v2/queues/demo/claims/5c6939a8ef2f8e4a1c4a1a1a", std(), "", 404, "Not found", "Claim 5c6939a8ef2f8e4a1c4a1a1a does not exist in queue demo for project p1"},
		{"patch unknown claim", "PATCH", "/v2/queues/demo/claims/5c6939a8ef2f8e4a1c4a1a1a", std(), `{"ttl":60}`, 404, "Not found", "Claim 5c6939a8ef2f8e4a1c4a1a1a does not exist in queue demo for project p1"},
		{"claim limit too large", "POST", "/v2/queues/demo/claims?limit=21", std(), `{"ttl":60,"grace":60}`, 400, "Invalid API request", "Limit must be at least 1 and may not be greater than 20."},
		{"claim limit after the body's types", "POST", "/v2/queues/demo/claims?limit=21", std(), `{"ttl":"60"}`, 400, "Invalid request body", `The value of the "ttl" field must be a int.`},
		{"claim limit before the grace's range", "POST", "/v2/queues/demo/claims?limit=21", std(), `{"ttl":60,"grace":1209600}`, 400, "Invalid API request", "Limit must be at least 1 and may not be greater than 20."},
		{"claim ttl range before the limit", "POST", "/v2/queues/demo/claims?limit=21", std(), `{"ttl":1,"grace":1209600}`, 400, "Invalid API request", "The TTL for a claim may not exceed 43200 seconds, and must be at least 60 seconds long."},
		{"claim limit without a body", "POST", "/v2/queues/demo/claims?limit=0", std(), ``, 400, "Invalid API request", "Limit must be at least 1 and may not be greater than 20."},
		{"claim limit not int", "POST", "/v2/queues/demo/claims?limit=x", std(), `{"ttl":60,"grace":60}`, 400, "Invalid parameter", `The "limit" parameter is invalid. The value must be an integer.`},
		{"claim ttl too small", "POST", "/v2/queues/demo/claims", std(), `{"ttl":10,"grace":60}`, 400, "Invalid API request", "The TTL for a claim may not exceed 43200 seconds, and must be at least 60 seconds long."},
		{"claim grace too small", "POST", "/v2/queues/demo/claims", std(), `{"ttl":60,"grace":1}`, 400, "Invalid API request", "The grace for a claim may not exceed 43200 seconds, and must be at least 60 seconds long."},
		{"claim body not object", "POST", "/v2/queues/demo/claims", std(), `[1]`, 400, "Invalid request body", "Document type not supported."},
		{"list limit too large", "GET", "/v2/queues/demo/messages?limit=21", std(), "", 400, "Invalid API request", "Limit must be at least 1 and may not be greater than 20."},
		{"list echo not bool", "GET", "/v2/queues/demo/messages?echo=maybe", std(), "", 400, "Invalid parameter", `The "echo" parameter is invalid. The value of the parameter must be "true" or "false".`},
		{"queue limit too large", "GET", "/v2/queues?limit=21", std(), "", 400, "Invalid API request", "Limit must be at least 1 and no greater than 20."},
		{"queue limit too large beside a bad boolean", "GET", "/v2/queues?limit=21&detailed=TRUE", std(), "", 400, "Invalid parameter", `The "detailed" parameter is invalid. The value of the parameter must be "true" or "false".`},
		{"pop beyond any int", "DELETE", "/v2/queues/demo/messages?pop=99999999999999999999", std(), "", 400, "Invalid API request", "Pop value must be at least 1 and may not be greater than 20."},
		{"pop too large", "DELETE", "/v2/queues/demo/messages?pop=50", std(), "", 400, "Invalid API request", "Pop value must be at least 1 and may not be greater than 20."},
		{"delete no ids with pop", "DELETE", "/v2/queues/demo/messages?ids=,&pop=1", std(), "", 400, "Invalid API request", "pop and id params cannot be present together in the delete request."},
		{"delete ids naming none", "DELETE", "/v2/queues/demo/messages?ids=,", std(), "", 400, "Invalid API request", "ids parameter should have at least 1 and not greater than 20 values."},
		{"delete neither", "DELETE", "/v2/queues/demo/messages", std(), "", 400, "Invalid API request", `The request should have either "ids" or "pop" parameter in the request, to be able to delete.`},
		{"delete both", "DELETE", "/v2/queues/demo/messages?ids=a&pop=1", std(), "", 400, "Invalid API request", "pop and id params cannot be present together in the delete request."},
		{"bulk get nothing found", "GET", "/v2/queues/demo/messages?ids=nope", std(), "", 404, "Not found", "No messages with IDs: ['nope'] found in the queue demo for project p1."},
		{"bulk get of a blank id", "GET", "/v2/queues/demo/messages?ids=%20", std(), "", 404, "Not found", "No messages with IDs: [' '] found in the queue demo for project p1."},
		{"patch wrong media type", "PATCH", "/v2/queues/demo", std("Content-Type", "application/json"), `[{"op":"add","path":"/metadata/x","value":1}]`, 415, "415 Unsupported Media Type", "Accepted media type for PATCH: {'Accept-Patch': 'application/openstack-messaging-v2.0-json-patch'}."},
		{"patch bad pointer", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"/x","value":1}]`, 400, "Invalid request body", `Invalid JSON pointer for this resource: "/x", e.g /metadata/key`},
		// What makes a path no JSON pointer, worded and ordered as Zaqar's
		// _validate_json_pointer does.
		{"patch pointer without slash", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"metadata/x","value":1}]`, 400, "Invalid request body", "Pointer `metadata/x` does not start with \"/\"."},
		{"patch pointer adjacent slashes", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata//x","value":1}]`, 400, "Invalid request body", "Pointer `/metadata//x` contains adjacent \"/\"."},
		{"patch pointer trailing slash", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata/","value":1}]`, 400, "Invalid request body", "Pointer `/metadata/` end with \"/\"."},
		{"patch pointer bad escape", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata/a~2","value":1}]`, 400, "Invalid request body", "Pointer `/metadata/a~2` contains \"~\" not part of a recognized escape sequence."},
		{"patch pointer other root", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"replace","path":"/meta/x","value":1}]`, 400, "Invalid request body", "The root of path must be metadata, e.g /metadata/key."},
		{"patch without op", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"path":"/metadata/x","value":1}]`, 400, "Invalid request body", "Unable to find `op` in JSON Schema change. It must be one of the following: add, remove, replace."},
		{"patch without path", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","value":1}]`, 400, "Invalid request body", "Unable to find 'path' in JSON Schema change"},
		{"patch without value", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"replace","path":"/metadata/x"}]`, 400, "Invalid request body", `Operation "replace" requires a member named "value".`},
		{"patch body over max-queue-metadata", "PATCH", "/v2/queues/demo", std("Content-Type", "application/json"), `[{"op":"add","path":"/metadata/x","value":"` + strings.Repeat("x", 70000) + `"}]`, 400, "Invalid request body", "Queue metadata is too large. Max size: 65536"},
		{"patch bad op", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"move","path":"/metadata/x"}]`, 400, "Invalid request body", "Invalid operation: `move`. It must be one of the following: add, remove, replace."},
		{"patch not a list", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `{"op":"add"}`, 400, "Invalid request body", "Document type not supported."},
		{"patch empty", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), "", 400, "Invalid request body", "PATCH body could not be empty for update."},
		{"patch replace missing key", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"replace","path":"/metadata/nope","value":1}]`, 409, "Resource conflict", "Can't replace non-existent object nope."},
		{"patch remove missing key", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"remove","path":"/metadata/nope"}]`, 409, "Resource conflict", "Can't remove non-existent object nope."},
		{"patch invalid reserved", "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata/_default_message_ttl","value":"x"}]`, 400, "Invalid request body", "_default_message_ttl must be integer."},
		{"patch never created queue", "PATCH", "/v2/queues/ghost", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata/x","value":1}]`, 404, "Not found", "Queue ghost does not exist for project p1"},
		{"metadata ttl out of range", "PUT", "/v2/queues/m1", std(), `{"_default_message_ttl":10}`, 400, "Invalid API request", "_default_message_ttl can not exceed 1209600 seconds, and must be at least 60 seconds long."},
		{"metadata post size", "PUT", "/v2/queues/m1", std(), `{"_max_messages_post_size":0}`, 400, "Invalid API request", "_max_messages_post_size can not exceed 262144, and must be at least greater than 0."},
		{"metadata not object", "PUT", "/v2/queues/m1", std(), `[1,2]`, 400, "Invalid request body", "Document type not supported."},
		{"metadata malformed", "PUT", "/v2/queues/m1", std(), `{"a":`, 400, "Invalid request body", "Request body could not be parsed."},
		{"metadata too large", "PUT", "/v2/queues/m1", std(), `{"a":"` + strings.Repeat("x", 70000) + `"}`, 400, "Invalid API request", "Queue metadata is too large. Max size: 65536"},
		{"body over the cap", "POST", "/v2/queues/demo/messages", std(), strings.Repeat(" ", 1<<20+1), 413, "Request entity too large", "The request body may not exceed 1048576 bytes."},
		{"batch over queue size", "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"body":"` + strings.Repeat("x", 262144) + `"}]}`, 400, "Invalid API request", "Message collection size is too large. Max size 262144"},
		{"purge without resource types", "POST", "/v2/queues/demo/purge", std(), `{}`, 400, "Invalid API request", `Post body must contain key "resource_types".`},
		{"purge body not an object", "POST", "/v2/queues/demo/purge", std(), `["messages"]`, 400, "Invalid API request", `Post body must contain key "resource_types".`},
		{"purge bad type", "POST", "/v2/queues/demo/purge", std(), `{"resource_types":["queues"]}`, 400, "Invalid API request", "Resource types must be a sub set of {'subscriptions', 'messages'}."},
		{"health without admin", "GET", "/v2/health", std(), "", 403, "Not authorized", "You are not authorized to complete this action."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.t = t
			r := ts.do(tc.method, tc.path, tc.h, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			m := r.json(t)
			if m["title"] != tc.title {
				t.Errorf("title %q, want %q", m["title"], tc.title)
			}
			if desc, _ := m["description"].(string); desc != tc.desc {
				t.Errorf("description %q, want %q", desc, tc.desc)
			}
			if r.header.Get("Vary") != "Accept" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", r.header)
			}
		})
	}
	ts.t = t
	// Nothing above may have written: the queue is still empty and m1 absent.
	if body := ts.must(200, "GET", "/v2/queues/demo/stats", std(), "").body; body != `{"messages":{"claimed":0,"free":0,"total":0}}` {
		t.Errorf("stats after rejected posts: %s", body)
	}
	if ok, _ := ts.drv.Queues().Exists(t.Context(), refOf("p1", "m1")); ok {
		t.Error("a rejected PUT created queue m1")
	}
}

func TestNotAcceptable(t *testing.T) {
	ts := startServer(t, nil)
	for _, accept := range []string{"text/html", "application/json;q=0", "text/*"} {
		r := ts.do("GET", "/v2/queues", std("Accept", accept), "")
		if r.status != 406 || r.body != "" || r.header.Get("Vary") != "Accept" {
			t.Errorf("Accept %q: %d %q", accept, r.status, r.body)
		}
	}
	for _, accept := range []string{"*/*", "application/json", "application/*;q=0.5", "text/html, application/json;q=0.9"} {
		if r := ts.do("GET", "/v2/queues", std("Accept", accept), ""); r.status != 200 {
			t.Errorf("Accept %q: %d", accept, r.status)
		}
	}
}

func TestMethodNotAllowedAllowHeader(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.must(405, "POST", "/v2/queues/demo", std(), "{}")
	if got := r.header.Get("Allow"); got != "DELETE, GET, PATCH, PUT, OPTIONS" {
		t.Errorf("Allow %q", got)
	}
	r = ts.must(200, "OPTIONS", "/v2/queues/demo/messages", std(), "")
	if got := r.header.Get("Allow"); got != "DELETE, GET, POST, OPTIONS" {
		t.Errorf("Allow %q", got)
	}
}
