"""An in-process HTTP double of the server's admin and queue API, speaking the
Zaqar v2 shapes recorded in the reference (pools, flavors, queue metadata,
stats, 409 on deleting a pool that holds queues). It records every request
so tests can assert exactly what the operator sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class State:
    def __init__(self) -> None:
        self.pools: dict[str, dict[str, Any]] = {}
        self.flavors: dict[tuple[str, str], list[str]] = {}
        self.queues: dict[tuple[str, str], dict[str, Any]] = {}
        self.placement: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.token = "admintoken"
        self.lock = threading.Lock()
        self.open_connections = 0
        # Subscriptions by (project, queue) -> id -> subscription; deliveries by
        # (project, queue) as the deliveries endpoint answers (None: no endpoint).
        self.subs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.deliveries: dict[tuple[str, str], dict[str, Any]] | None = {}
        self.next_id = 0
        # Queue moves by (project, queue), as GET .../migrate answers; None: a server
        # without moves (the migrate and pool-queues routes answer 404).
        self.moves: dict[tuple[str, str], dict[str, Any]] | None = None
        # Message totals by (project, queue) for stats; others answer 2 free + 1 claimed.
        self.totals: dict[tuple[str, str], int] = {}
        # Moves the server refuses, by (project, queue): (status, description).
        self.refuse: dict[tuple[str, str], tuple[int, str]] = {}
        # Storage reports by pool, as GET /v2/pools/{pool}/storage answers them (an int: that
        # error status); a registered pool not listed reports 1 MiB used of no limit, under
        # noeviction. None: a server without the endpoint (404).
        self.storage: dict[str, dict[str, Any] | int] | None = None
        # Called with (method, path) before each request is answered: the server's own
        # work (a move finishing) can land between two calls of one operator look.
        self.before: Callable[[str, str], None] | None = None

    def finish_move(self, key: tuple[str, str], error: str = "") -> None:
        """finish_move ends a move as the server's mover would: done (the queue now
        placed on the target, its messages moved) or failed with error (still on the source)."""
        assert self.moves is not None
        m = self.moves[key]
        if error:
            m.update(state="failed", error=error, finished="2026-01-01T00:00:00Z")
            return
        m.update(state="done", messages_moved=m["messages_remaining"], messages_remaining=0)
        m["finished"] = "2026-01-01T00:00:00Z"
        self.placement[key] = m["to"]


def _handler(state: State) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        # Keep-alive, as sluice-server: a client that never closes its connections
        # shows in state.open_connections.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, the client's next
        # request on the connection waits out Nagle against a delayed ACK (40 ms).
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with state.lock:
                state.open_connections += 1

        def finish(self) -> None:
            super().finish()
            with state.lock:
                state.open_connections -= 1

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _err(self, code: int, title: str, desc: str) -> None:
            self._send(code, {"title": title, "description": desc})

        def _handle(self, method: str) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            path = self.path.split("?")[0]
            state.requests.append((method, self.path, dict(self.headers), body))
            if state.before is not None:
                state.before(method, path)
            project = self.headers.get("X-Project-ID", "")
            if self.headers.get("Authorization") != f"Bearer {state.token}":
                return self._err(403, "Not authorized", "admin token required")
            parts = path.strip("/").split("/")
            if parts[:2] == ["v2", "pools"] and parts[3:] == ["queues"] and state.moves is not None:
                return self._pool_queues(parts[2])
            if parts[:2] == ["v2", "pools"] and parts[3:] == ["storage"] and state.storage is not None:
                return self._pool_storage(parts[2])
            if parts[:2] == ["v2", "pools"] and len(parts) == 3:
                return self._pool(method, parts[2], body)
            if parts[:2] == ["v2", "flavors"] and len(parts) == 3:
                if method == "PUT":
                    missing = [p for p in body["pool_list"] if p not in state.pools]
                    if missing:
                        return self._err(400, "Unable to create", f"Pool {missing[0]} does not exist")
                    state.flavors[(project, parts[2])] = list(body["pool_list"])
                    for p in body["pool_list"]:
                        state.pools[p]["flavor"] = parts[2]
                    return self._send(201)
                if method == "DELETE":
                    state.flavors.pop((project, parts[2]), None)
                    return self._send(204)
            if parts[:2] == ["v2", "queues"] and len(parts) >= 3:
                return self._queue(method, project, parts[2], parts[3:], body)
            return self._err(404, "Not found", path)

        def _pool(self, method: str, name: str, body: Any) -> None:
            p = state.pools.get(name)
            if method == "GET":
                if p is None:
                    return self._err(404, "Not found", f"Pool {name} does not exist")
                held = sum(1 for v in state.placement.values() if v == name)
                return self._send(200, {**p, "name": name, "href": f"/v2/pools/{name}", "queues": held})
            if method == "PUT":
                if "weight" not in body:
                    return self._err(400, "Invalid request body", "'weight' is a required property")
                state.pools[name] = {"uri": body["uri"], "weight": body["weight"], "flavor": body.get("flavor")}
                return self._send(201)
            if method == "PATCH":
                if p is None:
                    return self._err(404, "Not found", f"Pool {name} does not exist")
                p.update(body)
                return self._send(200, {**p, "name": name})
            if method == "DELETE":
                held = sum(1 for v in state.placement.values() if v == name)
                if held:
                    return self._err(409, "Conflict", f"Pool {name} still holds {held} queues")
                state.pools.pop(name, None)
                return self._send(204)

        def _pool_storage(self, name: str) -> None:
            assert state.storage is not None
            if name not in state.pools:
                return self._err(404, "Not found", f"Pool {name} does not exist")
            got = state.storage.get(name, {"used_bytes": 1 << 20, "max_bytes": 0, "eviction_policy": "noeviction"})
            if isinstance(got, int):
                return self._err(got, "Service unavailable", "Pool storage could not be read.")
            full = bool(got["max_bytes"]) and got["used_bytes"] >= got["max_bytes"]
            return self._send(200, {"full": full, **got})

        def _pool_queues(self, name: str) -> None:
            if name not in state.pools:
                return self._err(404, "Not found", f"Pool {name} does not exist")
            q = dict(p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p)
            limit = int(q.get("limit", 10))
            keys = sorted(k for k, v in state.placement.items() if v == name)
            if "marker" in q:
                keys = [k for k in keys if "/".join(k) > q["marker"].replace("%2F", "/")]
            page = keys[:limit]
            links = []
            if len(keys) > limit:
                links = [{"rel": "next", "href": f"/v2/pools/{name}/queues?limit={limit}&marker={'/'.join(page[-1])}"}]
            return self._send(200, {"queues": [{"project": p, "name": n} for p, n in page], "links": links})

        def _migrate(self, method: str, key: tuple[str, str], body: Any) -> None:
            """The contract's POST/GET /v2/queues/{q}/migrate, with its refusals."""
            assert state.moves is not None
            m = state.moves.get(key)
            if method == "GET":
                return self._send(200, m) if m else self._err(404, "Not found", "the queue never moved")
            if key not in state.queues:
                return self._err(404, "Not found", f"Queue {key[1]} does not exist")
            if key in state.refuse:
                return self._err(state.refuse[key][0], "Refused", state.refuse[key][1])
            target = (body or {}).get("pool")
            if target not in state.pools:
                return self._err(400, "Invalid API request", f"Pool {target} does not exist")
            if m and m["state"] not in ("done", "failed"):
                if m["to"] != target:
                    return self._err(409, "Conflict", f"Queue {key[1]} is moving to {m['to']}")
                return self._send(202, m)
            if state.placement.get(key) == target:
                return self._err(400, "Invalid API request", f"Queue {key[1]} is on pool {target} already")
            m = {
                "queue": key[1],
                "from": state.placement.get(key),
                "to": target,
                "state": "moving",
                "messages_moved": 0,
                "messages_remaining": 3,
                "batches": 0,
                "started": "2026-01-01T00:00:00Z",
                "finished": None,
                "error": None,
            }
            state.moves[key] = m
            return self._send(202, m, {"Location": f"/v2/queues/{key[1]}/migrate"})

        def _queue(self, method: str, project: str, name: str, rest: list[str], body: Any) -> None:
            key = (project, name)
            if rest == ["migrate"] and state.moves is not None:
                return self._migrate(method, key, body)
            if rest[:1] == ["subscriptions"]:
                return self._subscription(method, key, rest[1:], body)
            if rest == ["deliveries"]:
                if state.deliveries is None:
                    return self._err(404, "Not found", self.path)
                empty = {"pending": 0, "failed": 0, "delivered": 0, "last_error": None, "last_error_at": None}
                return self._send(200, state.deliveries.get(key, {**empty, "subscriptions": []}))
            if rest == ["stats"]:
                if key in state.totals:
                    n = state.totals[key]
                    return self._send(200, {"messages": {"free": n, "claimed": 0, "total": n}})
                return self._send(200, {"messages": {"free": 2, "claimed": 1, "total": 3, "oldest": {"age": 7}}})
            if method == "PUT":
                if key in state.queues:
                    return self._send(204)
                flavor = (body or {}).get("_flavor")
                pools = state.flavors.get((project, flavor), [])
                pools = [p for p in pools if state.pools[p]["weight"] > 0]
                if flavor and not pools:
                    return self._err(400, "Invalid API request", f"Flavor {flavor} does not exist")
                state.queues[key] = dict(body or {})
                state.placement[key] = pools[0]
                return self._send(201)
            if method == "GET":
                md = {"_default_message_ttl": 3600, "_default_message_delay": 0, "_max_messages_post_size": 262144}
                md.update(state.queues.get(key, {}))
                placed = state.placement.get(key)
                return self._send(200, md, {"X-Sluice-Pool": placed} if placed else None)
            if method == "PATCH":
                if self.headers.get("Content-Type") != "application/openstack-messaging-v2.0-json-patch":
                    return self._err(415, "Unsupported media type", "")
                for op in body:
                    state.queues[key][op["path"].split("/")[-1]] = op["value"]
                return self._send(200, state.queues[key])
            if method == "DELETE":
                state.queues.pop(key, None)
                state.placement.pop(key, None)
                return self._send(204)

        def _subscription(self, method: str, key: tuple[str, str], rest: list[str], body: Any) -> None:
            """Zaqar's subscription calls and validation messages, as the reference records them."""
            subs = state.subs.setdefault(key, {})
            if method == "POST" and not rest:
                scheme = str(body.get("subscriber", "")).split(":", 1)[0]
                if scheme not in ("http", "https", "mailto", "trust+http", "trust+https"):
                    return self._err(
                        400, "Invalid API request", "The subscriber type of subscription must be supported"
                    )
                if body.get("ttl", 60) < 60:
                    return self._err(400, "Invalid API request", "The TTL for a subscription must be at least 60")
                for sid, sub in subs.items():
                    if sub["subscriber"] == body["subscriber"]:
                        return self._send(201, {"subscription_id": sid})
                state.next_id += 1
                sid = f"sub-{state.next_id:04d}"
                subs[sid] = {
                    "id": sid,
                    "source": key[1],
                    "subscriber": body["subscriber"],
                    "ttl": body.get("ttl", 3600),
                    "age": 0,
                    "options": body.get("options", {}),
                    "confirmed": False,
                }
                return self._send(201, {"subscription_id": sid})
            if method == "GET" and not rest:
                q = dict(p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p)
                ids = sorted(subs)
                if "marker" in q:
                    ids = [i for i in ids if i > q["marker"]]
                page = ids[: int(q.get("limit", 10))]
                return self._send(200, {"subscriptions": [subs[i] for i in page], "links": []})
            sid = rest[0] if rest else ""
            if method == "PATCH":
                if sid not in subs:
                    return self._err(404, "Not found", f"Subscription {sid} does not exist")
                subs[sid].update({k: v for k, v in body.items() if k in ("ttl", "options", "subscriber")})
                subs[sid]["age"] = 0
                return self._send(204)
            if method == "DELETE":
                subs.pop(sid, None)
                return self._send(204)
            return self._err(405, "Method not allowed", self.path)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_PUT(self) -> None:
            self._handle("PUT")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return H


class ZaqarDouble:
    """ZaqarDouble serves on 127.0.0.1 on a free port until stop()."""

    def __init__(self) -> None:
        self.state = State()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def connections_closed(self, within: float = 5.0) -> bool:
        """connections_closed: every client connection has been closed, waiting up to
        within seconds for the server's side to see the close."""
        end = time.monotonic() + within
        while self.state.open_connections > 0 and time.monotonic() < end:
            time.sleep(0.01)
        return self.state.open_connections == 0

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
