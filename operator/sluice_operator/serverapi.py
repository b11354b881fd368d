"""Client for the sluice-server HTTP API the operator drives: the admin API
for pools and flavors, and queues (create, update metadata, stats, delete)
through the Zaqar v2 API. Shapes follow Zaqar v2 (see docs/operator.md)."""

from __future__ import annotations

import re
import urllib.parse
import uuid
from typing import Any

import requests

# A fixed Client-ID: the operator is one client however many replicas it has.
CLIENT_ID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "operator.sluice.dev"))


class ServerError(Exception):
    """ServerError is a 4xx answer: status, and Zaqar's title/description."""

    def __init__(self, status: int, title: str, description: str):
        super().__init__(f"{status} {title}: {description}")
        self.status, self.title, self.description = status, title, description


class Unavailable(Exception):
    """Unavailable: the server cannot be reached or answered 5xx; worth retrying."""


def queue_count_from(description: str) -> int | None:
    """queue_count_from reads "N queues" out of a 409 refusal to delete a pool."""
    m = re.search(r"(\d+)\s+queue", description)
    return int(m.group(1)) if m else None


class ServerAPI:
    """ServerAPI talks to one namespace's sluice-server with its admin token."""

    def __init__(
        self, base_url: str, token: str = "", timeout: float = 10.0, session: Any = None, verify: str | bool = True
    ):
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.http = session or requests.Session()
        if verify is not True:
            # https: the CA file the server's certificate must chain to.
            self.http.verify = verify

    def close(self) -> None:
        """close ends the session's keep-alive connections. A server stopping waits for
        its clients' open connections (docs/server.md, linger), so a reconcile step closes
        what it opened instead of leaving it to the garbage collector. The pools are
        closed one by one: urllib3 2 only forgets them on Session.close(), and an error
        still referenced (a retry's traceback holds the failed response, which holds its
        pool) would keep their connections open."""
        for adapter in self.http.adapters.values():
            manager = getattr(adapter, "poolmanager", None)
            if manager is not None:
                for key in manager.pools.keys():  # noqa: SIM118 (the container refuses iteration)
                    manager.pools[key].close()
        self.http.close()

    def __enter__(self) -> ServerAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _req(
        self,
        method: str,
        path: str,
        project: str = "sluice-admin",
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> requests.Response:
        headers = {"Client-ID": CLIENT_ID, "X-Project-ID": project, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        else:
            headers["X-Roles"] = "admin"
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            resp = self.http.request(
                method, self.base + path, json=body, headers=headers, params=params, timeout=(3, self.timeout)
            )
        except requests.RequestException as exc:
            raise Unavailable(f"{method} {path}: {exc}") from exc
        if resp.status_code >= 500:
            raise Unavailable(f"{method} {path}: {resp.status_code} {resp.text[:200]}")
        if resp.status_code >= 400:
            try:
                err = resp.json()
            except ValueError:
                err = {}
            raise ServerError(resp.status_code, str(err.get("title", resp.reason)), str(err.get("description", "")))
        return resp

    # -- pools and flavors (admin) ----------------------------------------

    def get_pool(self, name: str) -> dict[str, Any] | None:
        """get_pool returns the detailed pool, or None when it is not registered."""
        try:
            return self._req("GET", f"/v2/pools/{name}", params={"detailed": "true"}).json()
        except ServerError as exc:
            if exc.status == 404:
                return None
            raise

    def put_pool(self, name: str, uri: str, weight: int, flavor: str | None = None) -> None:
        """put_pool registers (or re-registers) a shard; the server checks the URI is reachable."""
        body: dict[str, Any] = {"uri": uri, "weight": weight, "options": {}}
        if flavor:
            body["flavor"] = flavor
        self._req("PUT", f"/v2/pools/{name}", body=body)

    def patch_pool(self, name: str, **fields: Any) -> dict[str, Any]:
        """patch_pool changes a registered pool's weight, uri or flavor."""
        return self._req("PATCH", f"/v2/pools/{name}", body=fields).json()

    def delete_pool(self, name: str) -> None:
        """delete_pool unregisters a shard; 409 (a ServerError) while it holds queues. Idempotent."""
        try:
            self._req("DELETE", f"/v2/pools/{name}")
        except ServerError as exc:
            if exc.status != 404:
                raise

    def pool_storage(self, name: str) -> dict[str, Any] | None:
        """pool_storage is how full a registered shard is, as the server last read it:
        used_bytes, max_bytes (0: no limit), eviction_policy ("" when unknown or not Redis)
        and full. None when the server cannot tell (the pool is not registered, or a server
        without the endpoint: both 404); Unavailable when the shard cannot be reached (503)."""
        try:
            body = self._req("GET", f"/v2/pools/{name}/storage").json()
        except ServerError as exc:
            if exc.status in (404, 405):
                return None
            raise
        return {
            "used_bytes": int(body.get("used_bytes") or 0),
            "max_bytes": int(body.get("max_bytes") or 0),
            "eviction_policy": str(body.get("eviction_policy") or ""),
            "full": bool(body.get("full")),
        }

    def pool_queues(self, pool: str, limit: int = 100, max_pages: int = 1000) -> list[tuple[str, str]] | None:
        """pool_queues lists the (project, queue) pairs placed on a pool, following the
        server's next links; None when the server cannot tell (no catalog, no such pool,
        or a server without the listing: all answer 404)."""
        out: list[tuple[str, str]] = []
        path, params = f"/v2/pools/{pool}/queues", {"limit": str(limit)}
        for _ in range(max_pages):
            try:
                page = self._req("GET", path, params=params).json()
            except ServerError as exc:
                if exc.status in (404, 405):
                    return None
                raise
            queues = page.get("queues") or []
            out.extend((str(q["project"]), str(q["name"])) for q in queues)
            nxt = next((ln.get("href") for ln in page.get("links") or [] if ln.get("rel") == "next"), None)
            if not queues or not nxt:
                break
            # The href repeats the query with the new marker; keep only the path and query.
            split = urllib.parse.urlsplit(str(nxt))
            path = split.path
            params = dict(urllib.parse.parse_qsl(split.query))
        return out

    def put_flavor(self, name: str, pools: list[str], project: str = "sluice-admin") -> None:
        """put_flavor makes flavor `name` group exactly `pools`."""
        self._req("PUT", f"/v2/flavors/{name}", project=project, body={"pool_list": pools, "capabilities": {}})

    def delete_flavor(self, name: str, project: str = "sluice-admin") -> None:
        """delete_flavor removes a flavor. Idempotent."""
        try:
            self._req("DELETE", f"/v2/flavors/{name}", project=project)
        except ServerError as exc:
            if exc.status != 404:
                raise

    # -- queues (Zaqar v2) -------------------------------------------------

    def put_queue(self, project: str, name: str, metadata: dict[str, Any]) -> bool:
        """put_queue creates a queue with metadata; True when it was new (201)."""
        return self._req("PUT", f"/v2/queues/{name}", project=project, body=metadata).status_code == 201

    def get_queue(self, project: str, name: str) -> dict[str, Any]:
        """get_queue returns the queue's metadata, reserved keys included, and under
        "_pool" the shard the server placed it on (its X-Sluice-Pool header)."""
        resp = self._req("GET", f"/v2/queues/{name}", project=project)
        meta: dict[str, Any] = resp.json()
        if pool := resp.headers.get("X-Sluice-Pool"):
            meta["_pool"] = pool
        return meta

    def patch_queue(self, project: str, name: str, changes: dict[str, Any], current: dict[str, Any]) -> None:
        """patch_queue sets metadata keys with Zaqar's JSON-patch dialect."""
        ops = [
            {"op": "replace" if key in current else "add", "path": f"/metadata/{key}", "value": value}
            for key, value in sorted(changes.items())
        ]
        if ops:
            self._req(
                "PATCH",
                f"/v2/queues/{name}",
                project=project,
                body=ops,
                content_type="application/openstack-messaging-v2.0-json-patch",
            )

    def queue_stats(self, project: str, name: str) -> tuple[dict[str, int], float]:
        """queue_stats returns the free, claimed and total message counts, and the
        oldest message's age in seconds (0 when the queue is empty)."""
        msgs = self._req("GET", f"/v2/queues/{name}/stats", project=project).json().get("messages", {})
        counts = {k: int(msgs.get(k, 0)) for k in ("free", "claimed", "total")}
        oldest = msgs.get("oldest") or {}
        return counts, float(oldest.get("age", 0) or 0)

    def delete_queue(self, project: str, name: str) -> None:
        """delete_queue deletes a queue and its messages (204 even when absent)."""
        self._req("DELETE", f"/v2/queues/{name}", project=project)

    # -- moving a queue to another pool (admin, docs/pooling.md "Moving a queue")

    def migrate_queue(self, project: str, name: str, pool: str) -> dict[str, Any]:
        """migrate_queue starts moving a queue to pool and returns the move's state (202).
        Asking again for the same target is harmless; a move to another pool under way is
        a 409 ServerError, an unknown pool or the queue's own pool a 400, a missing queue 404."""
        return dict(self._req("POST", f"/v2/queues/{name}/migrate", project=project, body={"pool": pool}).json())

    def migration(self, project: str, name: str) -> dict[str, Any] | None:
        """migration is the state of the queue's latest move (state sealing, moving, done or
        failed, with messages moved and remaining), or None when it never moved."""
        try:
            return dict(self._req("GET", f"/v2/queues/{name}/migrate", project=project).json())
        except ServerError as exc:
            if exc.status == 404:
                return None
            raise

    # -- subscriptions and delivery health (Zaqar v2, sluice extension) -----

    def list_subscriptions(self, project: str, queue: str, max_pages: int = 100) -> list[dict[str, Any]]:
        """list_subscriptions pages through a queue's subscriptions (Zaqar's limit/marker links)."""
        out: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": "20"}
        for _ in range(max_pages):
            page = self._req("GET", f"/v2/queues/{queue}/subscriptions", project=project, params=params).json()
            subs = page.get("subscriptions") or []
            out.extend(subs)
            if not subs or len(subs) < int(params["limit"]):
                break
            params = {"limit": params["limit"], "marker": str(subs[-1]["id"])}
        return out

    def create_subscription(self, project: str, queue: str, subscriber: str, ttl: int, options: dict[str, Any]) -> str:
        """create_subscription returns the subscription's id; posting an existing
        subscriber again returns its id and changes nothing (Zaqar's idempotent create)."""
        body = {"subscriber": subscriber, "ttl": ttl, "options": options}
        resp = self._req("POST", f"/v2/queues/{queue}/subscriptions", project=project, body=body)
        return str(resp.json()["subscription_id"])

    def update_subscription(self, project: str, queue: str, sid: str, ttl: int, options: dict[str, Any]) -> None:
        """update_subscription sets a subscription's ttl and options (PATCH, 204)."""
        body = {"ttl": ttl, "options": options}
        self._req("PATCH", f"/v2/queues/{queue}/subscriptions/{sid}", project=project, body=body)

    def delete_subscription(self, project: str, queue: str, sid: str) -> None:
        """delete_subscription removes one subscription (204, also when it is gone)."""
        self._req("DELETE", f"/v2/queues/{queue}/subscriptions/{sid}", project=project)

    def deliveries(self, project: str, queue: str) -> dict[str, Any] | None:
        """deliveries is the queue's notification delivery health, or None from a
        server that does not offer the endpoint (404/405)."""
        try:
            body: dict[str, Any] = self._req("GET", f"/v2/queues/{queue}/deliveries", project=project).json()
        except ServerError as exc:
            if exc.status in (404, 405):
                return None
            raise
        return body
