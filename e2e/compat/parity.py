"""Send the same scripted v2 requests to sluice-server and to the real
Zaqar 23.0.1 and list every difference in status code, Location header and
body shape (keys and JSON types; error titles verbatim). The source of the
behavioural differences listed in docs/compat.md.

    build/venv-compat/bin/python e2e/compat/parity.py [--store memory|redis] [--scenario core|notifications]

The core scenario replays the queue, message and claim reference; the
notifications scenario replays the subscriptions, pre-signed URL and topic
reference (shared/reference/zaqar-v2-subscriptions.md), with a webhook
receiver standing in for the subscriber and compared too. test_parity.py
runs it under make test-compat.

Starts its own redis-server, sluice-server and Zaqar (uwsgi) on free
loopback ports and stops them at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent / "zaqar"))

from harness import RedisServer, SluiceServer, WebhookReceiver  # noqa: E402

CID = "3381af92-2b9e-11e3-b191-71861300734c"
OTHER_CID = "5a1f1b2c-0000-4000-8000-00000000beef"
BASE = {"Client-ID": CID, "X-Project-ID": "parity", "Content-Type": "application/json"}
PATCH_CT = "application/openstack-messaging-v2.0-json-patch"
UUIDISH = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{24}")


class Session:
    """One server; remembers ids so later steps can refer to earlier ones."""

    def __init__(self, url: str):
        self.url, self.ids, self.claim = url, [], None
        self.subs: dict[str, str] = {}
        self.log: list[tuple[str, int, str | None, object]] = []

    def note(self, name: str, value: object) -> None:
        """Record a fact the scenario derived (compared like a body)."""
        self.log.append((name, 0, None, value))

    def call(self, name, method, path, body=None, headers=None, raw=None):
        hdrs = dict(BASE) if headers is None else headers
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        status, loc, doc = exchange(self.url + path, method, hdrs, data)
        self.log.append((name, status, loc, doc))
        return status, doc


def exchange(url: str, method: str, headers: dict[str, str], data: bytes | None):
    """One request: its status, Location header and decoded body (None when
    empty, "<not json>" when the body is not JSON, so the caller compares it)."""
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, loc, text = resp.status, resp.headers.get("Location"), resp.read()
    except urllib.error.HTTPError as err:
        status, loc, text = err.code, err.headers.get("Location"), err.read()
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = "<not json>"
    return status, loc, doc


class Answer:
    """One server's answer to a generated request: status and decoded body."""

    def __init__(self, status: int, doc: object):
        self.status, self.doc = status, doc

    def __repr__(self) -> str:
        return f"{self.status} {json.dumps(self.doc)[:300]}"


class Differences:
    """What a generated comparison with Zaqar found: the differences a rule
    of docs/compat.md explains, counted by rule, and the rest, reported.
    A rule is a function of (case, sluice's answer, Zaqar's answer)."""

    def __init__(self) -> None:
        self.unexplained: list[str] = []
        self.explained: dict[str, int] = {}

    def judge(self, label: str, why: str, case, s: Answer, z: Answer, rules, context: str = "",
              subject=None) -> None:
        """Counts the first rule that explains the difference, or keeps it
        for the report; context is further lines that locate it. The rules
        read subject, the request as sent, when it is not case itself."""
        rule = next((r for r in rules if r(case if subject is None else subject, s, z)), None)
        if rule is None:
            self.add(label, why, case, s, z, context)
        else:
            self.count(rule.__name__)

    def add(self, label: str, why: str, case, s: Answer, z: Answer, context: str = "") -> None:
        self.unexplained.append(f"case {label} ({why}): {case.describe()}\n{context}  sluice {s}\n  zaqar  {z}")

    def count(self, name: str) -> None:
        self.explained[name] = self.explained.get(name, 0) + 1

    def check(self, seed: int, cases: int, what: str = "cases") -> None:
        """Fails the test with the first unexplained differences."""
        import pytest

        if self.unexplained:
            pytest.fail(f"seed {seed}: {len(self.unexplained)} of {cases} {what} differ from Zaqar in a way "
                        f"docs/compat.md does not list (explained: {self.explained})\n"
                        + "\n".join(self.unexplained[:15]), pytrace=False)


def scenario(s: Session) -> None:
    q = "/v2/queues/demo"
    s.call("versions document, no headers", "GET", "/", headers={})
    s.call("ping without headers", "GET", "/v2/ping", headers={})
    s.call("GET /v2 without slash", "GET", "/v2")
    s.call("ping", "GET", "/v2/ping")
    s.call("health without admin role", "GET", "/v2/health")
    s.call("health with admin role", "GET", "/v2/health", headers={**BASE, "X-Roles": "admin"})
    s.call("delete absent queue", "DELETE", q)
    s.call("create queue with metadata", "PUT", q, {"description": "d", "_default_message_ttl": 3600})
    s.call("create existing queue", "PUT", q, {"description": "d"})
    s.call("get queue metadata", "GET", q)
    s.call("patch metadata", "PATCH", q, [{"op": "replace", "path": "/metadata/description",
                                           "value": "p"}], headers={**BASE, "Content-Type": PATCH_CT})
    s.call("patch with application/json", "PATCH", q, [{"op": "add", "path": "/metadata/x", "value": 1}])
    s.call("list queues", "GET", "/v2/queues")
    s.call("list queues detailed with_count", "GET", "/v2/queues?limit=1&detailed=true&with_count=true")
    s.call("stats of empty queue", "GET", q + "/stats")
    _, doc = s.call("post batch", "POST", q + "/messages", {"messages": [
        {"ttl": 300, "body": {"n": 1}}, {"ttl": 60, "body": "s"}, {"body": [1, 2]}]})
    if isinstance(doc, dict):
        s.ids = [r.rsplit("/", 1)[1] for r in doc.get("resources", [])]
    ids = s.ids + ["x"] * 3
    s.call("list as other client", "GET", q + "/messages", headers={**BASE, "Client-ID": OTHER_CID})
    s.call("list as same client (echo=false)", "GET", q + "/messages")
    s.call("list echo=true limit=2", "GET", q + "/messages?echo=true&limit=2")
    s.call("get message", "GET", f"{q}/messages/{ids[0]}")
    s.call("bulk get ids=a,b", "GET", f"{q}/messages?ids={ids[0]},{ids[1]}")
    s.call("stats after post", "GET", q + "/stats")
    _, doc = s.call("claim limit=2", "POST", q + "/claims?limit=2", {"ttl": 60, "grace": 60})
    if isinstance(doc, dict) and doc.get("messages"):
        s.claim = doc["messages"][0]["href"].split("claim_id=")[-1]
    cl = s.claim or "none"
    s.call("get claim", "GET", f"{q}/claims/{cl}")
    s.call("patch claim", "PATCH", f"{q}/claims/{cl}", {"ttl": 120, "grace": 60})
    s.call("get claimed message", "GET", f"{q}/messages/{ids[0]}")
    s.call("list include_claimed=true, no marker", "GET", q + "/messages?echo=true&include_claimed=true")
    s.call("delete claimed without claim_id", "DELETE", f"{q}/messages/{ids[0]}")
    s.call("delete claimed with wrong claim_id", "DELETE",
           f"{q}/messages/{ids[0]}?claim_id=51db7067821e727dc24df754")
    s.call("delete claimed with claim_id", "DELETE", f"{q}/messages/{ids[0]}?claim_id={cl}")
    s.call("get deleted message", "GET", f"{q}/messages/{ids[0]}")
    s.call("release claim", "DELETE", f"{q}/claims/{cl}")
    s.call("get released claim", "GET", f"{q}/claims/{cl}")
    s.call("claim, no body", "POST", q + "/claims")
    s.call("claim when nothing claimable", "POST", q + "/claims", {"ttl": 60, "grace": 60})
    s.call("post 2 more", "POST", q + "/messages", {"messages": [{"body": 1}, {"body": 2}]})
    s.call("pop=1 (all claimed)", "DELETE", q + "/messages?pop=1")
    s.call("pop=50", "DELETE", q + "/messages?pop=50")
    s.call("delete without ids or pop", "DELETE", q + "/messages")
    s.call("delete with ids and pop", "DELETE", f"{q}/messages?ids={ids[1]}&pop=1")
    s.call("purge messages", "POST", q + "/purge", {"resource_types": ["messages"]})
    s.call("stats after purge", "GET", q + "/stats")
    s.call("lazy post to unknown queue", "POST", "/v2/queues/lazy/messages", {"messages": [{"body": 1}]})
    s.call("metadata of never-created queue", "GET", "/v2/queues/never")
    s.call("stats of never-created queue", "GET", "/v2/queues/never/stats")
    s.call("bad JSON", "POST", q + "/messages", raw=b"{nope")
    s.call("messages not wrapped", "POST", q + "/messages", [{"body": 1}])
    s.call("message without body", "POST", q + "/messages", {"messages": [{"ttl": 60}]})
    s.call("ttl too small", "POST", q + "/messages", {"messages": [{"ttl": 1, "body": 1}]})
    s.call("empty messages list", "POST", q + "/messages", {"messages": []})
    s.call("no Client-ID", "GET", q + "/messages", headers={"X-Project-ID": "parity"})
    s.call("Client-ID not a UUID", "GET", q + "/messages", headers={**BASE, "Client-ID": "nope"})
    s.call("empty X-Project-ID", "GET", q + "/messages", headers={**BASE, "X-Project-ID": ""})
    s.call("no X-Project-ID", "GET", q + "/messages", headers={"Client-ID": CID})
    s.call("invalid queue name", "PUT", "/v2/queues/bad%20name")
    s.call("queue name > 64", "PUT", "/v2/queues/" + "a" * 65)
    s.call("unknown message id", "GET", f"{q}/messages/5c6939a8ef2f8e4a1c4a1a1a")
    s.call("unknown claim", "GET", f"{q}/claims/5c6939a8ef2f8e4a1c4a1a1a")
    s.call("claim limit=21", "POST", q + "/claims?limit=21", {"ttl": 60, "grace": 60})
    s.call("claim ttl too small", "POST", q + "/claims", {"ttl": 1, "grace": 60})
    s.call("list limit=21", "GET", q + "/messages?limit=21")
    s.call("unknown route", "GET", "/v2/nosuch")
    s.call("method not allowed", "POST", q + "/stats")
    s.call("Accept: text/html", "GET", q + "/stats", headers={**BASE, "Accept": "text/html"})
    s.call("form content type", "POST", q + "/messages", {"messages": [{"body": 1}]},
           headers={**BASE, "Content-Type": "application/x-www-form-urlencoded"})
    s.call("text/plain content type", "POST", q + "/messages", {"messages": [{"body": 1}]},
           headers={**BASE, "Content-Type": "text/plain"})
    s.call("delete queue", "DELETE", q)
    s.call("delete lazy queue", "DELETE", "/v2/queues/lazy")


SECRET = "parity-shared-secret"
# What the real Zaqar needs to notify subscribers and sign URLs, as recorded.
ZAQAR_NOTIFY_CONF = f"""
[storage]
message_pipeline = zaqar.notification.notifier

[notification]
require_confirmation = False

[signed_url]
secret_key = {SECRET}
"""
SLUICE_NOTIFY_ARGS = ["--signed-url-secret", SECRET]


def notification_scenario(s: Session, hook: WebhookReceiver) -> None:
    """The calls of the subscriptions reference, in its order."""
    q, pj = "/v2/queues/sq", {**BASE, "X-Project-ID": "parity"}
    subs = q + "/subscriptions"
    s.call("PUT queue sq", "PUT", q)
    s.call("GET subscriptions of a queue with none", "GET", subs)
    _, doc = s.call("POST subscription (webhook, ttl 3600, options)", "POST", subs,
                    {"subscriber": hook.url(), "ttl": 3600, "options": {"note": "a"}})
    s.subs["hook"] = (doc or {}).get("subscription_id", "none") if isinstance(doc, dict) else "none"
    _, doc = s.call("POST the same subscriber again", "POST", subs,
                    {"subscriber": hook.url(), "ttl": 3600, "options": {}})
    s.note("the same subscriber gets the same id", isinstance(doc, dict) and
           doc.get("subscription_id") == s.subs["hook"])
    _, doc = s.call("POST second subscriber (mailto)", "POST", subs,
                    {"subscriber": "mailto:ops@example.com", "ttl": 3600, "options": {"subject": "hi"}})
    s.subs["mail"] = (doc or {}).get("subscription_id", "none") if isinstance(doc, dict) else "none"
    one, mail = f"{subs}/{s.subs['hook']}", f"{subs}/{s.subs['mail']}"
    s.call("GET subscription", "GET", one)
    s.call("GET subscriptions list", "GET", subs)
    _, page = s.call("GET subscriptions list ?limit=1", "GET", subs + "?limit=1")
    seen = []
    for _ in range(3):  # Zaqar's pages hold random-id order: compare what they add up to
        if not isinstance(page, dict) or not page.get("subscriptions"):
            break
        seen += [x.get("subscriber") for x in page["subscriptions"]]
        _, page = s.call("GET the next page of one", "GET", page["links"][0]["href"])
    s.note("pages of one hold each subscriber once", sorted(seen))
    s.call("PATCH subscription ttl/options", "PATCH", one, {"ttl": 7200, "options": {"note": "b"}})
    s.call("GET subscription after PATCH", "GET", one)
    hook.clear()
    s.call("POST a message", "POST", q + "/messages", {"messages": [{"ttl": 300, "body": {"event": "created", "n": 1}}]})
    got = hook.wait(1)
    s.note("what the webhook receiver got", [{"path": r["path"], "body": r["body"]} for r in got])
    for name, body in [
            ("POST subscription with no body", None), ("POST subscription with empty object", {}),
            ("POST subscription with invalid subscriber", {"subscriber": "not a url", "ttl": 60}),
            ("POST subscription with unsupported scheme", {"subscriber": "email://x@example.com", "ttl": 60}),
            ("POST subscription with non-integer ttl", {"subscriber": hook.url("/x"), "ttl": "abc"}),
            ("POST subscription with options not an object", {"subscriber": hook.url("/x"), "ttl": 60, "options": "x"}),
            ("POST subscription with ttl below minimum", {"subscriber": hook.url("/x"), "ttl": 1})]:
        s.call(name, "POST", subs, body)
    s.call("POST subscription to a queue never created", "POST", "/v2/queues/nosuchq/subscriptions",
           {"subscriber": hook.url("/y"), "ttl": 60})
    s.call("GET subscriptions of a queue never created", "GET", "/v2/queues/nosuchq2/subscriptions")
    s.call("GET unknown subscription id", "GET", subs + "/5c6939a8ef2f8e4a1c4a1a1a")
    s.call("GET malformed subscription id", "GET", subs + "/xyz")
    s.call("PATCH unknown subscription", "PATCH", subs + "/5c6939a8ef2f8e4a1c4a1a1a", {"ttl": 100})
    s.call("PATCH subscription with empty body", "PATCH", one, {})
    s.call("PATCH subscription with invalid ttl", "PATCH", one, {"ttl": "x"})
    s.call("PATCH subscription with invalid json", "PATCH", one, raw=b'{"ttl":')
    s.call("PATCH subscription on a queue that does not exist", "PATCH",
           f"/v2/queues/nosuchq3/subscriptions/{s.subs['hook']}", {"ttl": 100})
    s.call("PUT confirm subscription", "PUT", one + "/confirm", {"confirmed": True})
    s.call("PUT confirm with bad body", "PUT", one + "/confirm", {"confirmed": "yes"})
    s.call("DELETE subscription", "DELETE", mail)
    s.call("GET deleted subscription", "GET", mail)
    s.call("DELETE unknown subscription id", "DELETE", subs + "/5c6939a8ef2f8e4a1c4a1a1a")
    s.call("DELETE subscription of a queue that does not exist", "DELETE",
           f"/v2/queues/nosuchq4/subscriptions/{s.subs['hook']}")
    s.call("POST purge subscriptions", "POST", q + "/purge", {"resource_types": ["subscriptions"]})
    s.call("GET subscriptions after purge", "GET", subs)
    s.call("POST purge with bad resource type", "POST", q + "/purge", {"resource_types": ["nope"]})
    s.call("Other project cannot see the subscription list", "GET", subs, headers={**pj, "X-Project-ID": "other"})

    s.call("POST share (defaults)", "POST", q + "/share", {})
    _, doc = s.call("POST share paths/methods/expires", "POST", q + "/share", {
        "paths": ["messages", "claims", "subscriptions"], "methods": ["GET", "POST"], "expires": "2099-01-01T00:00:00"})
    doc = doc if isinstance(doc, dict) else {}
    signed = {"Client-ID": CID, "X-Project-ID": "parity", "URL-Signature": doc.get("signature", "x"),
              "URL-Expires": doc.get("expires", "x"), "URL-Methods": ",".join(doc.get("methods", [])),
              "URL-Paths": ",".join(doc.get("paths", []))}
    s.call("GET messages with the signature headers only", "GET", q + "/messages", headers=signed)
    s.call("Tampered signature", "GET", q + "/messages", headers={**signed, "URL-Signature": "0000" + signed["URL-Signature"]})
    s.call("POST share with bad method", "POST", q + "/share", {"methods": ["PATCH"]})
    s.call("POST share with bad path", "POST", q + "/share", {"paths": ["nope"]})
    s.call("POST share expired", "POST", q + "/share", {"expires": "2000-01-01T00:00:00"})

    t = "/v2/topics/t1"
    s.call("GET /v2/topics", "GET", "/v2/topics")
    s.call("PUT topic t1", "PUT", t, {"_default_message_ttl": 3600})
    s.call("GET topic t1", "GET", t)
    s.call("GET /v2/topics after create", "GET", "/v2/topics")
    s.call("POST subscription to topic", "POST", t + "/subscriptions", {"subscriber": hook.url("/topic"), "ttl": 3600})
    s.call("POST message to topic", "POST", t + "/messages", {"messages": [{"ttl": 300, "body": {"topic": "event"}}]})
    s.call("GET topic stats", "GET", t + "/stats")
    s.call("POST topic purge", "POST", t + "/purge", {"resource_types": ["messages"]})
    s.call("DELETE topic", "DELETE", t)
    s.call("DELETE queue sq", "DELETE", q)


# Members whose values are compared too (not only their types) in the
# notifications scenario: what a client reads back must be what it wrote.
KEEP_VALUES = {"source", "subscriber", "ttl", "options", "confirmed", "paths", "methods",
               "project", "queue_name", "Message_Type", "body", "rel", "path"}


def shape(doc, depth=0, keep=frozenset()):
    """Keys and JSON types, not values; error titles are kept verbatim and
    hrefs with ids and numbers masked (so query parameters still compare)."""
    if isinstance(doc, dict):
        out = {k: (re.sub(r"=\d+", "=<n>", UUIDISH.sub("<id>", v))
                   if k == "href" and isinstance(v, str)
                   else v if k in keep else shape(v, depth + 1, keep))
               for k, v in sorted(doc.items())}
        if depth == 0 and "title" in doc:
            out["title"] = doc["title"]
        return out
    if isinstance(doc, list):
        if keep:
            # Order is volatile (Zaqar lists subscriptions by random id).
            return sorted((shape(d, depth + 1, keep) for d in doc), key=json.dumps)
        return [shape(doc[0], depth + 1)] if doc else []
    return type(doc).__name__


def location_shape(loc: str | None) -> str | None:
    return UUIDISH.sub("<id>", loc) if loc else loc


# Steps whose values depend on the order of random ids: shapes only.
SHAPE_ONLY = {"GET subscriptions list ?limit=1", "GET the next page of one"}


def without_options(doc):
    """A subscription page with each subscription's options emptied."""
    if not isinstance(doc, dict) or not isinstance(doc.get("subscriptions"), list):
        return doc
    return {**doc, "subscriptions": [{**x, "options": {}} for x in doc["subscriptions"]]}


def differences(a: Session, b: Session, keep=frozenset()) -> list[tuple[str, str, str]]:
    out = []
    for (name, sa, la, da), (_, sb, lb, db) in zip(a.log, b.log):
        k = keep
        if name in SHAPE_ONLY:
            k, da, db = frozenset(), without_options(da), without_options(db)
        if sa != sb:
            out.append((name, f"{sa}", f"{sb}"))
        elif location_shape(la) != location_shape(lb):
            out.append((name, f"Location {location_shape(la)}", f"Location {location_shape(lb)}"))
        elif shape(da, keep=k) != shape(db, keep=k):
            out.append((name, json.dumps(shape(da, keep=k))[:300], json.dumps(shape(db, keep=k))[:300]))
    return out


def run_notifications(tmp: Path, store: str) -> tuple[Session, Session]:
    """The notifications scenario against sluice (store "memory" or
    "redis") and against Zaqar configured as the reference was recorded."""
    from zaqar_server import ZaqarServer

    with RedisServer(tmp / "redis") as redis, WebhookReceiver() as hook:
        url = redis.url(1) if store == "redis" else "memory"
        with SluiceServer(tmp / "sluice", url, extra_args=SLUICE_NOTIFY_ARGS) as sluice, \
                ZaqarServer(tmp / "zaqar", redis.url(2), extra_conf=ZAQAR_NOTIFY_CONF) as zaqar:
            s, z = Session(sluice.url), Session(zaqar.url)
            notification_scenario(s, hook)
            notification_scenario(z, hook)
    return s, z


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default="redis", choices=["memory", "redis"])
    ap.add_argument("--scenario", default="core", choices=["core", "notifications"])
    args = ap.parse_args()
    from zaqar_server import ZaqarServer

    if args.scenario == "notifications":
        with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
            s, z = run_notifications(Path(tmp), args.store)
        diffs = differences(s, z, KEEP_VALUES)
        print(f"{len(s.log)} steps, {len(diffs)} differences (sluice --store {args.store} | Zaqar 23.0.1)")
        print("| request | sluice | Zaqar 23.0.1 |\n|---|---|---|")
        for name, a, b in diffs:
            print(f"| {name} | `{a}` | `{b}` |")
        return 0
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        with RedisServer(Path(tmp) / "redis") as redis:
            store = redis.url(1) if args.store == "redis" else "memory"
            with SluiceServer(Path(tmp) / "sluice", store) as sluice, \
                    ZaqarServer(Path(tmp) / "zaqar", redis.url(2), admin_mode=True) as zaqar:
                s, z = Session(sluice.url), Session(zaqar.url)
                scenario(s)
                scenario(z)
    diffs = differences(s, z)
    print(f"{len(s.log)} requests, {len(diffs)} differences (sluice --store {args.store} | Zaqar 23.0.1)")
    print("| request | sluice | Zaqar 23.0.1 |\n|---|---|---|")
    for name, a, b in diffs:
        print(f"| {name} | `{a}` | `{b}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
