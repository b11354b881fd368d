"""tls.enabled with real pods: the chart's operator, upgraded to serve TLS for
this module, gives the namespace its own CA and server certificate (no
cert-manager on the local cluster: the operator's own CA); the server pods
serve HTTPS with it; the operator registers the Pool's shard over HTTPS
(verifying the CA: the Pool becomes Ready only so); a sluice-bench pod of a
Benchmark completes its load against https:// trusting only that CA; a
handshake from this machine verifies with the CA for the Service's DNS name.
The release goes back to its previous values afterwards."""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
from collections.abc import Iterator

import pytest

from ..integration.conftest import ROOT, apply, get, kc, wait_for
from .conftest import RELEASE_NS
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
