"""Send the same scripted v2 requests to sluice-server and to the real
Zaqar 23.0.1 and list every difference in status code, Location header and
body shape (keys and JSON types; error titles verbatim). The source of the
behavioural differences listed in docs/compat.md.

    build/venv-compat/bin/python e2e/compat/parity.py [--store memory|redis]

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
sys.path.insert(0, str(HERE.parent / "zaqar"))

from harness import RedisServer, SluiceServer  # noqa: E402

CID = "3381af92-2b9e-11e3-b191-71861300734c"
OTHER = "5a1f1b2c-0000-4000-8000-00000000beef"
BASE = {"Client-ID": CID, "X-Project-ID": "parity", "Content-Type": "application/json"}
PATCH_CT = "application/openstack-messaging-v2.0-json-patch"
UUIDISH = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{24}")


class Session:
    """One server; remembers ids so later steps can refer to earlier ones."""

    def __init__(self, url: str):
        self.url, self.ids, self.claim = url, [], None
        self.log: list[tuple[str, int, str | None, object]] = []

    def call(self, name, method, path, body=None, headers=None, raw=None):
        hdrs = dict(BASE) if headers is None else headers
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, loc, text = resp.status, resp.headers.get("Location"), resp.read()
        except urllib.error.HTTPError as err:
            status, loc, text = err.code, err.headers.get("Location"), err.read()
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = "<not json>"
        self.log.append((name, status, loc, doc))
        return status, doc


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
    s.call("list as other client", "GET", q + "/messages", headers={**BASE, "Client-ID": OTHER})
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


def shape(doc, depth=0):
    """Keys and JSON types, not values; error titles are kept verbatim and
    hrefs with ids and numbers masked (so query parameters still compare)."""
    if isinstance(doc, dict):
        out = {k: (re.sub(r"=\d+", "=<n>", UUIDISH.sub("<id>", v))
                   if k == "href" and isinstance(v, str) else shape(v, depth + 1))
               for k, v in sorted(doc.items())}
        if depth == 0 and "title" in doc:
            out["title"] = doc["title"]
        return out
    if isinstance(doc, list):
        return [shape(doc[0], depth + 1)] if doc else []
    return type(doc).__name__


def location_shape(loc: str | None) -> str | None:
    return UUIDISH.sub("<id>", loc) if loc else loc


def differences(a: Session, b: Session) -> list[tuple[str, str, str]]:
    out = []
    for (name, sa, la, da), (_, sb, lb, db) in zip(a.log, b.log):
        if sa != sb:
            out.append((name, f"{sa}", f"{sb}"))
        elif location_shape(la) != location_shape(lb):
            out.append((name, f"Location {location_shape(la)}", f"Location {location_shape(lb)}"))
        elif shape(da) != shape(db):
            out.append((name, json.dumps(shape(da))[:300], json.dumps(shape(db))[:300]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default="redis", choices=["memory", "redis"])
    args = ap.parse_args()
    from zaqar_server import ZaqarServer

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
