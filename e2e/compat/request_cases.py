"""Generated requests for the Zaqar v2 API, for comparing sluice with the
real Zaqar 23.0.1 where the scripted replay (parity.py) cannot reach: the
combinations. Each case is one request against a queue in a known state
(three messages, the oldest claimed); every part of it (path, query,
headers, body) is drawn from values at and around Zaqar's limits, of the
wrong JSON type, or malformed. test_generated_parity.py sends every case
to both servers and compares what they answer.

A case refers to the queue's messages and claim by role ("claimed",
"free", ...), so the same case means the same thing on both servers,
whose ids differ. draw_steps makes a sequence of one to three cases on
the same queue.
"""

from __future__ import annotations

import json
import random
import urllib.parse
from dataclasses import dataclass, field

from parity import CID, OTHER_CID, PATCH_CT


# Numbers at and around every limit of the v2 API (message ttl 60..1209600,
# delay 0..900, claim ttl and grace 60..43200), then the wrong JSON types.
NUMBERS = [-1, 0, 1, 59, 60, 61, 300, 900, 901, 3600, 43200, 43201, 1209600, 1209601,
           2**31, 2**53, 2**63, 1.5, 60.0, -0.5]
WRONG_TYPES = ["60", "", None, True, False, [], {}, [60], {"a": 1}]
VALUES = NUMBERS + WRONG_TYPES
BODIES = [None, 0, 1.25, "s", "", [], {}, {"a": [1, {"b": None}]}, True, "x" * 300, [None]]
# Query parameter values: numbers as text, and not numbers.
QUERY_NUMBERS = ["0", "1", "2", "10", "11", "20", "21", "-1", "1.5", "x", "", " 2", "1e1", "007",
                 "99999999999999999999"]
QUERY_BOOLS = ["true", "false", "True", "FALSE", "TRUE", "1", "0", "yes", "Yes", "t", "on", "off", "n", "", "x"]
# Message and claim ids by role: resolved per server at send time.
ID_ROLES = ["claimed", "free", "free2", "unknown", "malformed", "empty", "claim", "spaced"]
# The roles that can be a path's last step (a space cannot).
PATH_ROLES = ["claimed", "free", "free2", "unknown", "malformed"]
CLAIM_ROLES = ["claim", "unknown", "malformed", "empty", "free"]
QUEUE_NAME_CHARS = "abcXYZ019-_"
# Characters Zaqar's names may not hold, and the dot, which they may.
OTHER_NAME_CHARS = [".", ".", " ", "~", "!", "@", "$", ":", "é", "%", "+", "*", "'"]


@dataclass
class Case:
    """One request. path and query may hold {id:role} placeholders; body is
    JSON unless raw is set; header_changes are applied over the default
    headers (Client-ID, X-Project-ID), None removing one."""
    family: str
    method: str
    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    body: object = None
    has_body: bool = False
    raw: bytes | None = None
    header_changes: dict[str, str | None] = field(default_factory=dict)
    content_type: str = "application/json"

    def describe(self) -> str:
        q = ("?" + urllib.parse.urlencode(self.query, safe=",{}:")) if self.query else ""
        out = f"{self.method} {self.path}{q}"
        if self.raw is not None:
            out += f" raw={self.raw[:120]!r}"
        elif self.has_body:
            out += f" body={json.dumps(self.body)[:300]}"
        if self.header_changes:
            out += f" headers={self.header_changes}"
        if self.content_type != "application/json":
            out += f" content-type={self.content_type!r}"
        return out


def queue_name(rng: random.Random) -> str:
    """Names of every length around the 64-character limit, half of them
    with one character outside [a-zA-Z0-9_-]."""
    n = rng.choice([1, 2, 8, 63, 64, 65, 100])
    name = "".join(rng.choice(QUEUE_NAME_CHARS) for _ in range(n))
    if rng.random() < 0.5:
        i = rng.randrange(len(name) + 1)
        name = name[:i] + rng.choice(OTHER_NAME_CHARS) + name[i:]
    return name


def maybe(rng: random.Random, p: float = 0.5) -> bool:
    return rng.random() < p


def some(rng: random.Random, options: dict[str, list], at_most: int | None = None) -> dict:
    """A random subset of options' keys, each with a drawn value."""
    keys = [k for k in options if maybe(rng)]
    if at_most is not None:
        keys = keys[:at_most]
    return {k: rng.choice(options[k]) for k in keys}


def message(rng: random.Random) -> object:
    if maybe(rng, 0.05):
        return rng.choice(WRONG_TYPES)
    msg = {}
    if maybe(rng, 0.9):
        msg["body"] = rng.choice(BODIES)
    if maybe(rng, 0.4):
        msg["ttl"] = rng.choice(VALUES)
    if maybe(rng, 0.3):
        msg["delay"] = rng.choice(VALUES)
    if maybe(rng, 0.05):
        msg["extra"] = 1
    return msg


def post_messages(rng: random.Random, q: str) -> Case:
    k = rng.choice([0, 1, 1, 2, 3, 10, 11, 21])
    msgs = [message(rng) for _ in range(k)]
    body = rng.choice([{"messages": msgs}] * 6 + [msgs, {"messages": {}}, {}, "s", None,
                                                  {"messages": msgs, "x": 1}])
    return Case("post messages", "POST", q + "/messages", body=body, has_body=True)


def list_messages(rng: random.Random, q: str) -> Case:
    query = list(some(rng, {"limit": QUERY_NUMBERS, "echo": QUERY_BOOLS,
                            "include_claimed": QUERY_BOOLS, "include_delayed": QUERY_BOOLS}).items())
    if maybe(rng, 0.3):
        query.append(("marker", rng.choice(["{id:claimed}", "{id:free}", "{id:unknown}",
                                             "{id:malformed}", "0", "-1", "x"])))
    changes: dict[str, str | None] = {"Client-ID": OTHER_CID} if maybe(rng) else {}
    return Case("list messages", "GET", q + "/messages", query=query, header_changes=changes)


def ids_value(rng: random.Random) -> list[tuple[str, str]]:
    n = rng.choice([0, 1, 2, 3, 20, 21])
    if n == 0 and maybe(rng):
        return [("ids", ",")]  # given, but naming no id
    roles = [rng.choice(ID_ROLES) for _ in range(n)]
    ids = ",".join("{id:%s}" % r for r in roles)
    if maybe(rng, 0.2) and n > 1:
        # python-zaqarclient's encoding: the parameter repeated.
        return [("ids", "{id:%s}" % r) for r in roles]
    return [("ids", ids)]


def get_messages(rng: random.Random, q: str) -> Case:
    return Case("get messages by id", "GET", q + "/messages", query=ids_value(rng))


def delete_messages(rng: random.Random, q: str) -> Case:
    query = []
    if maybe(rng, 0.7):
        query += ids_value(rng)
    if maybe(rng, 0.5) or not query:
        query.append(("pop", rng.choice(QUERY_NUMBERS)))
    return Case("delete messages", "DELETE", q + "/messages", query=query)


def one_message(rng: random.Random, q: str) -> Case:
    role = rng.choice(PATH_ROLES)
    method = rng.choice(["GET", "DELETE"])
    query = []
    if method == "DELETE" and maybe(rng, 0.6):
        query.append(("claim_id", "{id:%s}" % rng.choice(CLAIM_ROLES)))
    return Case("one message", method, q + "/messages/{id:%s}" % role, query=query)


def claim_body(rng: random.Random) -> tuple[object, bool]:
    if maybe(rng, 0.1):
        return None, False
    if maybe(rng, 0.1):
        return rng.choice(WRONG_TYPES), True
    return some(rng, {"ttl": VALUES, "grace": VALUES, "limit": VALUES}), True


def create_claim(rng: random.Random, q: str) -> Case:
    body, has = claim_body(rng)
    query = [("limit", rng.choice(QUERY_NUMBERS))] if maybe(rng) else []
    return Case("create claim", "POST", q + "/claims", query=query, body=body, has_body=has)


def claim_call(rng: random.Random, q: str) -> Case:
    role = rng.choice(CLAIM_ROLES)
    method = rng.choice(["GET", "PATCH", "DELETE"])
    body, has = claim_body(rng) if method == "PATCH" else (None, False)
    return Case("claim by id", method, q + "/claims/{id:%s}" % role, body=body, has_body=has)


METADATA = {"_default_message_ttl": VALUES, "_max_messages_post_size": VALUES + [1023, 1024, 262144, 262145],
            "_default_message_delay": VALUES, "_dead_letter_queue": ["dlq", "", 1, None, "bad name"],
            "_dead_letter_queue_messages_ttl": VALUES, "_max_claim_count": VALUES,
            "description": ["d", 1, None, {}], "_flavor": ["", "f", 1]}


def put_queue(rng: random.Random, q: str) -> Case:
    name = "/v2/queues/" + urllib.parse.quote(queue_name(rng), safe="") if maybe(rng, 0.3) else q
    if maybe(rng, 0.15):
        return Case("put queue", "PUT", name)
    body = some(rng, METADATA) if maybe(rng, 0.9) else rng.choice(WRONG_TYPES)
    return Case("put queue", "PUT", name, body=body, has_body=True)


def patch_queue(rng: random.Random, q: str) -> Case:
    def op() -> object:
        if maybe(rng, 0.05):
            return rng.choice(WRONG_TYPES)
        o = {"op": rng.choice(["add", "replace", "remove", "test", "copy", "bogus"]),
             "path": rng.choice(["/metadata/x", "/metadata/_default_message_ttl", "/metadata",
                                 "/x", "", "metadata/x", "/metadata/description"])}
        if maybe(rng, 0.8):
            o["value"] = rng.choice(VALUES)
        return o
    body = [op() for _ in range(rng.choice([0, 1, 1, 2]))] if maybe(rng, 0.9) else {"a": 1}
    ct = PATCH_CT if maybe(rng, 0.8) else rng.choice(["application/json", "text/plain"])
    return Case("patch queue", "PATCH", q, body=body, has_body=True, content_type=ct)


def list_queues(rng: random.Random, q: str) -> Case:
    query = list(some(rng, {"limit": QUERY_NUMBERS, "detailed": QUERY_BOOLS,
                            "with_count": QUERY_BOOLS}).items())
    if maybe(rng, 0.2):
        query.append(("marker", rng.choice(["a", "", "zzz", "bad name"])))
    return Case("list queues", "GET", "/v2/queues", query=query)


def queue_reads(rng: random.Random, q: str) -> Case:
    path = rng.choice([q, q + "/stats"])
    return Case("queue reads", rng.choice(["GET", "GET", "HEAD"]), path)


def purge(rng: random.Random, q: str) -> Case:
    types = [rng.choice(["messages", "subscriptions", "claims", "", 1]) for _ in range(rng.choice([0, 1, 2]))]
    body = rng.choice([{"resource_types": types}] * 4 + [{}, {"resource_types": "messages"}, [], None])
    return Case("purge", "POST", q + "/purge", body=body, has_body=True)


# Subscribers: webhooks to the discard port of loopback (nothing is posted
# after a case's subscription is made, so nothing is delivered), mail
# addresses, and what is neither.
SUBSCRIBERS = ["http://127.0.0.1:9/hook", "https://127.0.0.1:9/", "mailto:ops@example.org",
               "mailto:", "ftp://127.0.0.1/", "127.0.0.1:9", "", 1, None, ["http://127.0.0.1:9/"]]


def subscribe(rng: random.Random, q: str) -> Case:
    body = some(rng, {"subscriber": SUBSCRIBERS, "ttl": VALUES,
                      "options": [{}, {"a": 1}, [], "x", None, {"post_data": "{}"}]})
    if maybe(rng, 0.7):
        body.setdefault("subscriber", rng.choice(SUBSCRIBERS))
    return Case("subscribe", "POST", q + "/subscriptions", body=body, has_body=True)


def subscription_calls(rng: random.Random, q: str) -> Case:
    method = rng.choice(["GET", "GET", "PATCH", "DELETE"])
    if method == "GET" and maybe(rng):
        query = list(some(rng, {"limit": QUERY_NUMBERS, "marker": ["", "x", "{id:unknown}"]}).items())
        return Case("subscription calls", "GET", q + "/subscriptions", query=query)
    role = rng.choice(["unknown", "malformed", "free"])
    body = some(rng, {"subscriber": SUBSCRIBERS, "ttl": VALUES, "options": [{}, "x"]})
    return Case("subscription calls", method, q + "/subscriptions/{id:%s}" % role,
                body=body, has_body=method == "PATCH")


def share(rng: random.Random, q: str) -> Case:
    """POST …/share: both servers sign with one secret (the test's)."""
    def subset(options: list) -> list:
        return [o for o in options if maybe(rng, 0.4)]
    body = some(rng, {
        "paths": [subset(["messages", "subscriptions", "claims", "queues", "x"]), "messages", [], None, [1]],
        "methods": [subset(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "get"]), "GET", [], None],
        "expires": ["2099-01-01T00:00:00", "2099-01-01T00:00:00Z", "2099-01-01T00:00:00.5+02:00",
                    "2000-01-01T00:00:00", "tomorrow", "", 1, None]})
    return Case("share", "POST", q + "/share", body=body, has_body=True)


FAMILIES = [post_messages, post_messages, list_messages, get_messages, delete_messages,
            one_message, create_claim, claim_call, put_queue, patch_queue, list_queues,
            queue_reads, purge, subscribe, subscription_calls, share]


def headers_for(rng: random.Random, case: Case) -> None:
    """Now and then, one header missing or malformed."""
    if not maybe(rng, 0.12):
        return
    k = rng.randrange(3)
    if k == 0:
        case.header_changes["Client-ID"] = rng.choice(
            [None, "nope", "", CID.replace("-", ""), CID.upper(), CID + "x"])
    elif k == 1:
        # Placeholders the sender fills from the case's own project, so no
        # two cases share one.
        case.header_changes["X-Project-ID"] = rng.choice(
            [None, "", "{project:256}", "{project:257}", "{project} x"])
    else:
        case.content_type = rng.choice(["", "text/plain", "application/x-www-form-urlencoded",
                                        "application/json; charset=utf-8"])


def draw_steps(rng: random.Random, queue_path: str) -> list[Case]:
    """One to three requests in a row on the same queue, so that what one
    changes (metadata, a claim, a deletion) meets what the next asks."""
    return [draw(rng, queue_path) for _ in range(rng.choice([1, 1, 2, 3]))]


def draw(rng: random.Random, queue_path: str) -> Case:
    case = rng.choice(FAMILIES)(rng, queue_path)
    headers_for(rng, case)
    if case.has_body and maybe(rng, 0.03):
        case.raw = rng.choice([b"{nope", b"", b"\xff\xfe", b"[1,", b"null", b"{}" * 2])
    return case


# Pre-signed requests: a URL signed for one queue's resources, then used,
# as signed or with its headers tampered with, on routes of that queue and
# of a neighbour whose name is close to it (the signed name with its dot
# replaced, or one character longer or shorter).
SIGNABLE = ["messages", "claims", "subscriptions"]
SIGNED_METHODS = ["DELETE", "GET", "HEAD", "POST", "PUT"]
SIGNED_ROUTES = ["{q}/messages", "{q}/messages/{id:free}", "{q}/messages/{id:claimed}",
                 "{q}/claims", "{q}/claims/{id:claim}", "{q}/subscriptions", "{q}/stats", "{q}",
                 "{q}/share", "{q}/purge", "{n}/messages", "{n}/messages/{id:n_free}", "{n}/claims",
                 "{n}/subscriptions", "/v2/queues", "/v2/ping"]
# How a signed request's headers are changed: each a header and what is
# done to it (request_cases.tampered applies them).
TAMPERS = {
    "URL-Signature": ["drop", "empty", "upper", "truncate", "extend"],
    "URL-Expires": ["drop", "zulu", "offset", "fraction", "later", "past", "integer", "space"],
    "URL-Methods": ["drop", "empty", "reverse", "lower", "space", "only", "add"],
    "URL-Paths": ["drop", "empty", "reverse", "space", "neighbour", "pattern", "broken", "relative"],
    "X-Project-ID": ["drop", "empty", "other"],
    "Client-ID": ["drop", "other"],
}


@dataclass
class SignedCase:
    """A queue and its neighbour, the share body that signs a URL for the
    queue, and the request then sent with the URL's headers (request's
    path holds {q}, {n} and {id:role} placeholders; the neighbour's roles
    are n_<role>) after the changes in tamper."""
    queue: str
    neighbour: str
    share: dict
    request: Case
    tamper: dict[str, str]

    def describe(self) -> str:
        return (f"queue {self.queue!r} neighbour {self.neighbour!r} share {json.dumps(self.share)} "
                f"then {self.request.describe()} tamper {self.tamper}")


def signed_names(rng: random.Random) -> tuple[str, str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    word = "".join(rng.choice(letters) for _ in range(rng.randint(2, 6)))
    if maybe(rng):
        i = rng.randint(1, len(word) - 1)
        return word[:i] + "." + word[i:], word[:i] + rng.choice("-_x9") + word[i:]
    return word, rng.choice([word + rng.choice(letters), word[:-1], "x" + word])


def signed_body(method: str, route: str) -> tuple[object, bool, str]:
    """A body the route would take from that method, and its content type."""
    if method == "POST" and route.endswith("/messages"):
        return {"messages": [{"body": {"signed": True}, "ttl": 300}]}, True, "application/json"
    if method == "POST" and route.endswith("/claims"):
        return {"ttl": 60, "grace": 60}, True, "application/json"
    if method == "POST" and route.endswith("/subscriptions"):
        return {"subscriber": "http://127.0.0.1:9/hook", "ttl": 3600}, True, "application/json"
    if method == "PATCH" and "/claims/" in route:
        return {"ttl": 120}, True, "application/json"
    if method == "PATCH" and route == "{q}":
        return [{"op": "add", "path": "/metadata/k", "value": 1}], True, PATCH_CT
    if method == "PUT" and route in ("{q}", "{n}"):
        return {}, True, "application/json"
    if method == "POST" and route.endswith("/purge"):
        return {"resource_types": ["subscriptions"]}, True, "application/json"
    return None, False, "application/json"


def draw_signed(rng: random.Random) -> SignedCase:
    queue, neighbour = signed_names(rng)
    share_body = {"expires": "2099-01-01T00:00:00"}
    if maybe(rng, 0.8):
        share_body["paths"] = [p for p in SIGNABLE if maybe(rng, 0.5)] or [rng.choice(SIGNABLE)]
    if maybe(rng, 0.8):
        share_body["methods"] = [m for m in SIGNED_METHODS if maybe(rng, 0.5)] or ["GET"]
    methods = share_body.get("methods", ["GET"])
    # Mostly a method the URL was signed for, so the signature is what
    # decides.
    method = rng.choice(methods) if maybe(rng, 0.7) else rng.choice(SIGNED_METHODS + ["PATCH"])
    route = rng.choice(SIGNED_ROUTES)
    query: list[tuple[str, str]] = []
    if method == "DELETE" and route.endswith("/messages"):
        query = [("ids", "{id:free}")] if maybe(rng) else [("pop", "1")]
    if "{id:claimed}" in route and method in ("GET", "DELETE") and maybe(rng):
        query = [("claim_id", "{id:claim}")]
    body, has_body, ct = signed_body(method, route)
    request = Case("signed", method, "/v2/queues/" + route if route.startswith("{") else route,
                   query=query, body=body, has_body=has_body, content_type=ct)
    tamper = {}
    if maybe(rng, 0.7):
        for header in rng.sample(sorted(TAMPERS), rng.choice([1, 1, 2])):
            tamper[header] = rng.choice(TAMPERS[header])
    return SignedCase(queue, neighbour, share_body, request, tamper)


def tampered(signed: dict, case: SignedCase, base: str) -> dict[str, str | None]:
    """The headers of a request made with the signed document (as /share
    answered it), changed as case.tamper says; None removes a header. base
    is "/v2/queues/" and the neighbour's name is known, so a path can be
    moved to it."""
    h: dict[str, str | None] = {
        "X-Project-ID": signed["project"], "URL-Signature": signed["signature"],
        "URL-Expires": signed["expires"], "URL-Methods": ",".join(signed["methods"]),
        "URL-Paths": ",".join(signed["paths"])}
    method = case.request.method
    for header, how in case.tamper.items():
        value = h.get(header)
        if how == "drop":
            h[header] = None
        elif how == "empty":
            h[header] = ""
        elif header == "Client-ID":
            h[header] = OTHER_CID
        elif header == "X-Project-ID":
            h[header] = signed["project"] + "-other"
        elif header == "URL-Signature":
            h[header] = {"upper": value.upper(), "truncate": value[:-1], "extend": value + "0"}[how]
        elif header == "URL-Expires":
            h[header] = {"zulu": value + "Z", "offset": value + "+00:00", "fraction": value + ".5",
                         "later": value[:-1] + str((int(value[-1]) + 1) % 10),
                         "past": "2000-01-01T00:00:00", "integer": "4070908800",
                         "space": " " + value}[how]
        elif header == "URL-Methods":
            listed = list(signed["methods"])
            h[header] = {"reverse": ",".join(reversed(listed)), "lower": value.lower(),
                         "space": ", ".join(listed), "only": method,
                         "add": ",".join(sorted(set(listed) | {method}))}[how]
        else:  # URL-Paths
            listed = list(signed["paths"])
            h[header] = {"reverse": ",".join(reversed(listed)), "space": ", ".join(listed),
                         "neighbour": ",".join(p.replace(base + case.queue + "/", base + case.neighbour + "/")
                                               for p in listed),
                         "pattern": ".*", "broken": "(", "relative": ",".join(p.rsplit("/", 1)[1] for p in listed)}[how]
    return h
