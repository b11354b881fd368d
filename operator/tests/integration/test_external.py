"""The whole Pool -> server -> Queue path without a kubelet: an `external`
Pool whose shards are real redis-server processes on loopback, and the
namespace's server a real sluice-server process (pooling on, catalog in a
third redis-server) that the operator reaches through SERVER_URL_TEMPLATE."""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from ..support import Processes, server_stack
from .conftest import Operator, apply, condition, drop_namespace, get, kc, rbac_denials, status, wait_for


@pytest.fixture(scope="module")
def stack(sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("external")
    procs = Processes()
    try:
        srv = server_stack(procs, tmp)
        wait_for("sluice-server", lambda: _up(srv.base), timeout=30)
    except BaseException:
        procs.stop()
        raise
    base, token = srv.base, srv.token
    ns = f"sit-ext-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", ns)
    for secret in srv.secrets(ns):
        apply(secret)
    op = Operator(sa_kubeconfig, ns, tmp / "operator.log", {"SLUICE_OPERATOR_SERVER_URL_TEMPLATE": base})
    st = {"ns": ns, "base": base, "token": token, "op": op}
    yield st
    try:
        # Queues made straight through the API (dead-letter targets, lazy
        # creation) are not Queue resources: remove them so the Pool may go.
        for q in zaqar(st, "GET", "/v2/queues?limit=100").json().get("queues", []):
            zaqar(st, "DELETE", f"/v2/queues/{q['name']}")
        drop_namespace(ns)
    finally:
        op.stop()
        procs.stop()
    assert not rbac_denials(op.text()), rbac_denials(op.text())


def _up(base: str) -> bool:
    try:
        return requests.get(base + "/", timeout=1).status_code in (200, 300)
    except requests.RequestException:
        return False


def zaqar(stack: dict, method: str, path: str, body=None, project: str | None = None) -> requests.Response:
    headers = {
        "Client-ID": str(uuid.uuid4()),
        "X-Project-ID": project or stack["ns"],
        "Authorization": f"Bearer {stack['token']}",
    }
    return requests.request(method, stack["base"] + path, json=body, headers=headers, timeout=10)


def test_pool_registers_and_queue_serves(stack: dict) -> None:
    ns = stack["ns"]
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "ext", "namespace": ns},
            "spec": {
                "backend": "redis",
                "provisioner": "external",
                "shards": 2,
                "weight": 50,
                "placement": {"nodeClass": "any"},
                "external": {"secretRef": {"name": "shards"}},
            },
        }
    )
    start = time.monotonic()
    obj = wait_for(
        "Pool Ready",
        lambda: (o := get("pool", ns, "ext")) and condition(o, "Ready").get("status") == "True" and o,
        timeout=60,
    )
    print(f"external Pool apply->Ready {time.monotonic() - start:.1f}s")
    assert obj["status"]["phase"] == "Ready" and obj["status"]["readyShards"] == "2/2"
    pools = zaqar(stack, "GET", "/v2/pools?detailed=true").json()["pools"]
    assert sorted((p["name"], p["weight"], p["flavor"]) for p in pools) == [("ext-0", 50, "ext"), ("ext-1", 50, "ext")]
    assert zaqar(stack, "GET", "/v2/flavors/ext").json()["pool_list"] == ["ext-0", "ext-1"]

    start = time.monotonic()
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "orders", "namespace": ns},
            "spec": {"pool": "ext", "messageTTL": 600, "deadLetter": {"queue": "orders-dlq", "maxClaimCount": 3}},
        }
    )
    wait_for("Queue Ready", lambda: condition(get("queue", ns, "orders"), "Ready").get("status") == "True", timeout=30)
    print(f"Queue apply->Ready {time.monotonic() - start:.1f}s")
    md = zaqar(stack, "GET", "/v2/queues/orders").json()
    assert (
        md["_default_message_ttl"] == 600 and md["_max_claim_count"] == 3 and md["_dead_letter_queue"] == "orders-dlq"
    )
    r = zaqar(stack, "POST", "/v2/queues/orders/messages", {"messages": [{"body": i} for i in range(3)]})
    assert r.status_code == 201, r.text
    wait_for(
        "message counts in status",
        lambda: ((get("queue", ns, "orders") or {}).get("status") or {}).get("messages", {}).get("total") == 3,
        timeout=30,
    )
    # Spec changes reach the server as metadata patches.
    kc("patch", "queue", "orders", "-n", ns, "--type=merge", "-p", '{"spec":{"messageTTL":900}}')
    wait_for(
        "ttl patched",
        lambda: zaqar(stack, "GET", "/v2/queues/orders").json()["_default_message_ttl"] == 900,
        timeout=30,
    )


class Hooks:
    """A webhook receiver on loopback recording what the server POSTs."""

    def __init__(self) -> None:
        got: list[tuple[dict, bytes]] = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got.append((dict(self.headers), body))
                self.send_response(204)
                self.end_headers()

        self.got = got
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_queue_subscriptions_deliver_signed_and_report_health(stack: dict) -> None:
    """spec.subscriptions reach the real server; its webhook POSTs are signed with
    the Secret's value, which shows up nowhere in the Queue; delivery health lands
    in the status; a subscription removed from the spec is deleted."""
    ns, secret = stack["ns"], "whsec-" + secrets.token_hex(8)
    hooks = Hooks()
    try:
        apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": ns},
               "stringData": {"key": secret}})  # fmt: skip
        spec = {
            "pool": "ext",
            "subscriptions": [
                {"subscriber": hooks.url, "ttl": 3600, "options": {"note": "a"},
                 "secretRef": {"name": "hook", "key": "key"}},
                {"subscriber": "mailto:ops@example.com"},
            ],
        }  # fmt: skip
        apply({"apiVersion": "sluice.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "notified", "namespace": ns},
               "spec": spec})  # fmt: skip
        obj = wait_for(
            "Subscribed",
            lambda: (o := get("queue", ns, "notified")) and condition(o, "Subscribed").get("status") == "True" and o,
            timeout=60,
        )
        subs = zaqar(stack, "GET", "/v2/queues/notified/subscriptions").json()["subscriptions"]
        by = {s["subscriber"]: s for s in subs}
        # The server keeps the secret (the signature below proves it) and never shows it back.
        assert by[hooks.url]["options"] == {"note": "a", "secret": "<redacted>"} and by[hooks.url]["ttl"] == 3600
        assert {s["subscriber"]: s["id"] for s in obj["status"]["subscriptions"]} == {k: v["id"] for k, v in by.items()}

        r = zaqar(stack, "POST", "/v2/queues/notified/messages", {"messages": [{"ttl": 300, "body": {"n": 1}}]})
        assert r.status_code == 201, r.text
        headers, raw = wait_for("webhook POST", lambda: hooks.got and hooks.got[0], timeout=30)
        note = json.loads(raw)
        assert note["body"] == {"n": 1} and note["queue_name"] == "notified" and note["Message_Type"] == "Notification"
        mac = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
        assert headers.get("X-Sluice-Signature") == f"sha256={mac}"

        def delivered() -> dict | None:
            o = get("queue", ns, "notified")
            return o if o and (status(o).get("deliveries") or {}).get("delivered", 0) >= 1 else None

        obj = wait_for("delivered in status", delivered, timeout=60)
        events = kc("get", "events", "-n", ns, "-o", "json").stdout
        assert secret not in json.dumps(obj) and secret not in events and secret not in stack["op"].text()

        # Dropping the mailto subscriber deletes it on the server; the webhook stays.
        kc("patch", "queue", "notified", "-n", ns, "--type=merge",
           "-p", json.dumps({"spec": {"subscriptions": spec["subscriptions"][:1]}}))  # fmt: skip

        def listed() -> list[str]:
            resp = zaqar(stack, "GET", "/v2/queues/notified/subscriptions").json()
            return [s["subscriber"] for s in resp["subscriptions"]]

        wait_for("mailto deleted", lambda: listed() == [hooks.url], timeout=60)
        kc("delete", "queue", "notified", "-n", ns, "--timeout=60s")
        assert listed() == []
    finally:
        hooks.stop()


def test_two_queues_naming_one_server_queue(stack: dict) -> None:
    """Two Queues that name one server-side queue (same project and name): the
    older owns it. The other is not Ready (reason Conflict, naming the owner) and
    changes nothing on the server; deleting either Queue while the other still
    names the queue leaves the queue and its messages alone."""
    ns = stack["ns"]

    def declare(obj: str, ttl: int, **spec: str) -> None:
        body = {"pool": "ext", "messageTTL": ttl, **spec}
        apply(
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": obj, "namespace": ns},
                "spec": body,
            }
        )

    def ttl() -> int:
        return int(zaqar(stack, "GET", "/v2/queues/invoices").json()["_default_message_ttl"])

    declare("invoices", 600)
    wait_for("invoices Ready", lambda: condition(get("queue", ns, "invoices"), "Ready").get("status") == "True")
    r = zaqar(stack, "POST", "/v2/queues/invoices/messages", {"messages": [{"body": i} for i in range(2)]})
    assert r.status_code == 201, r.text
    declare("invoices-copy", 120, name="invoices")
    copy = wait_for(
        "Conflict",
        lambda: (o := get("queue", ns, "invoices-copy")) and condition(o, "Ready").get("reason") == "Conflict" and o,
        timeout=30,
    )
    assert "Queue invoices" in condition(copy, "Ready")["message"], condition(copy, "Ready")
    # Two of the copy's ticks (SLUICE_OPERATOR_QUEUE_INTERVAL) go by: the owner's ttl holds.
    time.sleep(2 * 2 + 1)
    assert ttl() == 600
    assert condition(get("queue", ns, "invoices"), "Ready").get("status") == "True"

    def total() -> int:
        return int(zaqar(stack, "GET", "/v2/queues/invoices/stats").json()["messages"]["total"])

    kc("delete", "queue", "invoices-copy", "-n", ns, "--timeout=60s")
    assert total() == 2
    # The owner goes while a newer copy still names the queue: the copy takes it over.
    declare("invoices-copy", 120, name="invoices")
    kc("delete", "queue", "invoices", "-n", ns, "--timeout=60s")
    wait_for("the copy owns it", lambda: ttl() == 120, timeout=30)
    assert total() == 2
    assert condition(get("queue", ns, "invoices-copy"), "Ready").get("status") == "True"
    kc("delete", "queue", "invoices-copy", "-n", ns, "--timeout=60s")
    names = [q["name"] for q in zaqar(stack, "GET", "/v2/queues?limit=100").json().get("queues", [])]
    assert "invoices" not in names, names


def test_scale_down_refused_while_shard_holds_queues(stack: dict) -> None:
    ns = stack["ns"]
    # Put queues on both shards: the server's weighted choice decides where each lands.
    # Each names a dead-letter queue, which the server places on the same shard before
    # any message is dead-lettered: deleting the Queues must release those places too.
    for i in range(12):
        spec = {"pool": "ext", "deadLetter": {"queue": f"spread{i}-dlq", "maxClaimCount": 5}}
        apply(
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": f"spread{i}", "namespace": ns},
                "spec": spec,
            }
        )
    wait_for(
        "spread queues Ready",
        lambda: all(condition(get("queue", ns, f"spread{i}"), "Ready").get("status") == "True" for i in range(12)),
        timeout=60,
    )
    # Without moves (test_migration.py has them): the shard waits for its queues to go.
    patch = '{"spec":{"shards":1,"drain":{"migrateQueues":false}}}'
    kc("patch", "pool", "ext", "-n", ns, "--type=merge", "-p", patch)
    obj = wait_for(
        "ScaledDown=False",
        lambda: (o := get("pool", ns, "ext")) and condition(o, "ScaledDown").get("status") == "False" and o,
        timeout=60,
    )
    msg = condition(obj, "ScaledDown")["message"]
    assert "ext-1 holds" in msg and "queue(s)" in msg, msg
    assert obj["status"]["phase"] == "Draining"
    pool1 = zaqar(stack, "GET", "/v2/pools/ext-1").json()
    assert pool1["weight"] == 0
    # Once every queue is gone (dead-letter places included) the shard is unregistered
    # and dropped from status.
    names = ["orders"] + [f"spread{i}" for i in range(12)]
    kc("delete", "queue", *names, "-n", ns, "--timeout=120s")
    wait_for(
        "shard removed",
        lambda: [s["name"] for s in (get("pool", ns, "ext") or {}).get("status", {}).get("shards", [])] == ["ext-0"],
        timeout=60,
    )
    assert zaqar(stack, "GET", "/v2/pools/ext-1").status_code == 404
    assert json.loads(kc("get", "pool", "ext", "-n", ns, "-o", "json").stdout)["status"]["phase"] == "Ready"
