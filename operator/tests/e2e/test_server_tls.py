"""tls.enabled with real pods: the chart's operator, upgraded to serve TLS for
this module, gives the namespace its own CA and server certificate (no
cert-manager on the local cluster: the operator's own CA); the server pods
serve HTTPS with it; the operator registers the Pool's shard over HTTPS
(verifying the CA: the Pool becomes Ready only so); a sluice-bench pod of a
Benchmark completes its load against https:// trusting only that CA; a
handshake from this machine verifies with the CA for the Service's DNS name.
Backend TLS (test_backend_tls): a builtin Redis Pool's shard and the catalog
serve TLS only with certificates from the same CA; messages flow through the
server; the operator's probe without TLS is refused by the shard, with TLS
and the CA it answers; no key material shows in status or events.
The release goes back to its previous values afterwards."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ..integration.conftest import ROOT, apply, get, kc, wait_for
from .conftest import RELEASE_NS, operator_pods
from .test_benchmarks import benchmark, run
from .test_pools import pool, ready

RELEASE = "sluice"


def _helm(*args: str) -> None:
    helm = os.environ.get("HELM") or str(ROOT / "build/bin/helm")
    out = subprocess.run(
        [helm, "upgrade", RELEASE, str(ROOT / "charts/sluice"), "-n", RELEASE_NS, "--reuse-values", *args],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 0, out.stderr
    kc("-n", RELEASE_NS, "rollout", "status", f"deployment/{RELEASE}", "--timeout=180s")


@pytest.fixture(scope="module")
def tls_operator(operator: None) -> Iterator[None]:
    _helm("--set", "tls.enabled=true", "--wait", "--timeout", "5m")
    yield
    _helm("--set", "tls.enabled=false", "--wait", "--timeout", "5m")


def test_https_end_to_end(tls_operator: None, ns: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    apply(pool(ns, "tls", 1))
    wait_for("Pool tls Ready (shard registered over HTTPS)", lambda: ready("pool", ns, "tls"), timeout=300)
    status = (get("pool", ns, "tls") or {})["status"]
    assert status["server"] == f"https://sluice-server.{ns}.svc:8888", status["server"]

    secret = json.loads(kc("get", "secret", "sluice-server-tls", "-n", ns, "-o", "json").stdout)
    ca = tmp_path_factory.mktemp("tls") / "ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    svc = json.loads(kc("get", "service", "sluice-server", "-n", ns, "-o", "json").stdout)
    addr = (svc["spec"]["clusterIP"], 8888)
    ctx = ssl.create_default_context(cafile=str(ca))
    host = f"sluice-server.{ns}.svc"
    with socket.create_connection(addr, timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=host) as tls:
        tls.sendall(f"GET /v2/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert tls.recv(64).startswith(b"HTTP/1.1 "), "no HTTP answer over TLS"
    # Only HTTPS is served: a plain-text request gets no HTTP answer.
    with socket.create_connection(addr, timeout=10) as raw:
        raw.sendall(b"GET /v2/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not raw.recv(64).startswith(b"HTTP/1.1 2")

    b = run(ns, benchmark(ns, "tls-td", pool="tls"))
    assert b["status"]["phase"] == "Succeeded", (b["status"].get("reason"), b["status"].get("message"))
    kc("delete", "benchmark", "tls-td", "-n", ns, "--wait=false")


# Run in the operator's pod with its own code: the probe it uses for shards,
# once over plain TCP and once over TLS trusting the namespace's CA.
OPERATOR_PY = "/opt/sluice-operator/bin/python"
PROBE_BOTH = """
import json, sys, tempfile
from sluice_operator import probes
from sluice_operator.builders import common
host, password, ca = sys.argv[1:4]
with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as f:
    f.write(ca)
plain = probes.probe(common.redis_uri(host, 6379, 0, password), 3.0)
tls = probes.probe(common.redis_uri(host, 6379, 0, password, "/server/side/path"), 3.0, f.name)
print(json.dumps({"plain": plain, "tls": tls}))
"""


def _secret(ns: str, name: str) -> dict[str, bytes]:
    obj = json.loads(kc("get", "secret", name, "-n", ns, "-o", "json").stdout)
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


class _Verified(http.client.HTTPSConnection):
    """HTTPS to the Service's address, verified for its DNS name (this machine
    routes Service addresses but does not resolve cluster names)."""

    def __init__(self, addr: str, port: int, name: str, ctx: ssl.SSLContext) -> None:
        super().__init__(addr, port, timeout=10, context=ctx)
        self.name, self.ctx = name, ctx

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), timeout=10)
        self.sock = self.ctx.wrap_socket(raw, server_hostname=self.name)


def _call(ns: str, ctx: ssl.SSLContext, method: str, path: str, body: Any = None) -> Any:
    token = _secret(ns, "sluice-server-admin")["token"].decode()
    svc = json.loads(kc("get", "service", "sluice-server", "-n", ns, "-o", "json").stdout)
    conn = _Verified(svc["spec"]["clusterIP"], 8888, f"sluice-server.{ns}.svc", ctx)
    try:
        conn.request(
            method,
            path,
            body=None if body is None else json.dumps(body),
            headers={
                "Authorization": f"Bearer {token}",
                "X-Project-ID": ns,
                "Client-ID": str(uuid.uuid4()),
                "Content-Type": "application/json",
            },
        )
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.status < 300, (method, path, resp.status, raw[:300])
        return json.loads(raw or b"null")
    finally:
        conn.close()


def test_backend_tls(tls_operator: None, ns: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    apply(pool(ns, "btls", 1))
    wait_for("Pool btls Ready (shard probed over TLS)", lambda: ready("pool", ns, "btls"), timeout=300)

    # The shard and the catalog run TLS only, from their own certificate Secrets.
    for sts, secret in (("btls-0", "btls-0-tls"), ("sluice-catalog", "sluice-catalog-tls")):
        obj = json.loads(kc("get", "statefulset", sts, "-n", ns, "-o", "json").stdout)
        (c,) = obj["spec"]["template"]["spec"]["containers"]
        assert "--port 0 --tls-port 6379" in c["command"][-1], c["command"]
        vols = {v["name"]: v for v in obj["spec"]["template"]["spec"]["volumes"]}
        assert vols["backend-tls"]["secret"]["secretName"] == secret, vols
    shard_tls, server_tls = _secret(ns, "btls-0-tls"), _secret(ns, "sluice-server-tls")
    assert shard_tls["ca.crt"] == server_tls["ca.crt"], "one CA per namespace"
    dep = json.loads(kc("get", "deployment", "sluice-server", "-n", ns, "-o", "json").stdout)
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (
        env["SLUICE_CATALOG"].startswith("rediss://") and "tls_ca_file=/etc/sluice/tls/ca.crt" in env["SLUICE_CATALOG"]
    )

    # Messages flow: client -> HTTPS -> server -> rediss catalog and shard.
    ca = tmp_path_factory.mktemp("btls") / "ca.crt"
    ca.write_bytes(server_tls["ca.crt"])
    ctx = ssl.create_default_context(cafile=str(ca))
    _call(ns, ctx, "PUT", "/v2/queues/sealed", {"_flavor": "btls"})
    _call(ns, ctx, "POST", "/v2/queues/sealed/messages", {"messages": [{"ttl": 300, "body": "over-tls"}]})
    got = _call(ns, ctx, "GET", "/v2/queues/sealed/messages?echo=true&limit=10")
    assert "over-tls" in [m["body"] for m in got["messages"]], got

    # The shard refuses the operator's probe over plain TCP, and answers it over TLS.
    op = [p for p in operator_pods() if p["status"].get("phase") == "Running"]
    assert op, f"no running operator pod in {RELEASE_NS}"
    password = _secret(ns, "btls-0-redis-auth")["password"].decode()
    out = kc(
        "exec", "-n", RELEASE_NS, op[0]["metadata"]["name"], "--",
        OPERATOR_PY, "-c", PROBE_BOTH, f"btls-0.{ns}.svc", password, server_tls["ca.crt"].decode(),
    )  # fmt: skip
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["tls"][0] is True, res
    assert res["plain"][0] is False and "PING failed" in res["plain"][1], res

    # No key material (nor the password) in the Pool's status or the namespace's events.
    shown = kc("get", "pool", "btls", "-n", ns, "-o", "json").stdout
    shown += kc("get", "events", "-n", ns, "-o", "json").stdout
    for name in ("btls-0-tls", "sluice-catalog-tls", "sluice-server-tls", "sluice-server-ca"):
        key = _secret(ns, name)["tls.key"]
        for part in (base64.b64encode(key).decode()[:40], key.decode().splitlines()[1]):
            assert part not in shown, f"{name} key material in status or events"
    assert "PRIVATE KEY" not in shown and password not in shown

    _call(ns, ctx, "DELETE", "/v2/queues/sealed")
    kc("delete", "pool", "btls", "-n", ns, "--wait=false")
