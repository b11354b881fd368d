"""tls.enabled on a real apiserver, cert-manager absent: the operator (under
its least-privilege RBAC) generates the namespace's CA and the server's
certificate into Secrets, the server Deployment mounts them and serves HTTPS
(probes included), and a certificate that no longer chains to the CA or is
about to expire is issued again on the next reconcile."""

from __future__ import annotations

import base64
import datetime as dt
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509

from sluice_operator import selfsigned

from .conftest import Operator, apply, drop_tls_namespace, get, kc, make_namespace, wait_for
from .test_pools import pool

SECRET, CA_SECRET = "sluice-server-tls", "sluice-server-ca"


@pytest.fixture(scope="module")
def tls_ns(sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ns = make_namespace("sit-tls")
    op = Operator(
        sa_kubeconfig, ns, tmp_path_factory.mktemp("op") / "operator.log", {"SLUICE_OPERATOR_SERVER_TLS": "true"}
    )
    yield ns
    drop_tls_namespace(ns, op)


def data(ns: str, name: str) -> dict[str, bytes]:
    secret = get("secret", ns, name) or {}
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def test_secrets_issued_and_mounted(tls_ns: str) -> None:
    ns = tls_ns
    assert kc("get", "crd", "certificates.cert-manager.io", check=False).returncode != 0, "expects no cert-manager"
    apply(pool(ns, "tls", shards=1, placement={"nodeClass": "any"}))
    srv = wait_for("Secret sluice-server-tls", lambda: data(ns, SECRET) or None, timeout=90)
    ca = data(ns, CA_SECRET)
    assert srv["ca.crt"] == ca["tls.crt"]
    assert (get("secret", ns, SECRET) or {})["type"] == "kubernetes.io/tls"
    names = ["sluice-server", f"sluice-server.{ns}", f"sluice-server.{ns}.svc", f"sluice-server.{ns}.svc.cluster.local"]
    now = dt.datetime.now(dt.UTC)
    pair = selfsigned.KeyPair(srv["tls.crt"], srv["tls.key"])
    assert selfsigned.server_reason(ca["tls.crt"], pair, names, now, dt.timedelta(days=30)) == ""

    dep = wait_for("Deployment sluice-server", lambda: get("deployment", ns, "sluice-server"), timeout=60)
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
    assert env["SLUICE_TLS_CERT_FILE"] == mount["mountPath"] + "/tls.crt"
    assert env["SLUICE_TLS_KEY_FILE"] == mount["mountPath"] + "/tls.key"
    assert {"name": "tls", "secret": {"secretName": SECRET, "defaultMode": 420}} in spec["volumes"]
    assert all(c[p]["httpGet"]["scheme"] == "HTTPS" for p in ("startupProbe", "readinessProbe", "livenessProbe"))
    status = wait_for("Pool status.server", lambda: ((get("pool", ns, "tls") or {}).get("status") or {}).get("server"))
    assert status.startswith("https://"), status


def _foreign_cert(names: list[str]) -> selfsigned.KeyPair:
    other = selfsigned.issue_ca("someone else", dt.datetime.now(dt.UTC))
    return selfsigned.issue_server(other, names, 90, dt.datetime.now(dt.UTC))


def _serial(raw: bytes) -> int:
    return x509.load_pem_x509_certificate(raw).serial_number


@pytest.mark.parametrize("case", ["foreign CA", "expiring"])
def test_bad_certificate_is_issued_again(tls_ns: str, case: str) -> None:
    ns = tls_ns
    before = wait_for("Secret sluice-server-tls", lambda: data(ns, SECRET) or None, timeout=90)
    ca_before = data(ns, CA_SECRET)["tls.crt"]
    names = [f"sluice-server.{ns}.svc"]
    if case == "foreign CA":
        bad = _foreign_cert(names)
    else:
        # Signed by the right CA but valid for one more day: inside the renewal window.
        ca = data(ns, CA_SECRET)
        bad = selfsigned.issue_server(
            selfsigned.KeyPair(ca["tls.crt"], ca["tls.key"]), names, 1, dt.datetime.now(dt.UTC)
        )
    patch: dict[str, Any] = {
        "data": {"tls.crt": base64.b64encode(bad.cert).decode(), "tls.key": base64.b64encode(bad.key).decode()}
    }
    kc("patch", "secret", SECRET, "-n", ns, "--type=merge", "-p", json.dumps(patch))

    def reissued() -> dict[str, bytes] | None:
        now = data(ns, SECRET)
        return now if now["tls.crt"] not in (bad.cert, before["tls.crt"]) else None

    after = wait_for("certificate issued again", reissued, timeout=60)
    assert _serial(after["tls.crt"]) not in (_serial(bad.cert), _serial(before["tls.crt"]))
    # The CA stays: clients that trust it keep trusting the new certificate.
    assert data(ns, CA_SECRET)["tls.crt"] == ca_before == after["ca.crt"]
