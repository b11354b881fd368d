"""Server TLS: the operator's CA and certificates (selfsigned.py), the objects
that carry them (builders/tls.py and the server / Benchmark builders), the
renewal decisions of handlers/tls.py on an in-memory apiserver, and the
configuration that turns it on."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import random
import ssl
from typing import Any

import pytest
from cryptography import x509

from sluice_operator import kube, selfsigned
from sluice_operator.builders import benchmark as bb
from sluice_operator.builders import server as sb
from sluice_operator.builders import tls as tb
from sluice_operator.config import Config, ConfigError
from sluice_operator.handlers import tls as th

from .kube_double import Store

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
NAMES = tb.dns_names(Config(), "shop")


@pytest.fixture(scope="module")
def ca() -> selfsigned.KeyPair:
    return selfsigned.issue_ca("test CA", NOW)


@pytest.fixture(scope="module")
def server(ca: selfsigned.KeyPair) -> selfsigned.KeyPair:
    return selfsigned.issue_server(ca, NAMES, 90, NOW)


def test_issued_certificate_verifies_with_openssl_against_the_ca(tmp_path: Any) -> None:
    """The pair works in a real TLS stack: Python's ssl (OpenSSL) loads the
    server pair and a client context trusting only the CA accepts it (issued
    now: OpenSSL checks validity against the real clock)."""
    now = dt.datetime.now(dt.UTC)
    ca = selfsigned.issue_ca("test CA", now)
    server = selfsigned.issue_server(ca, NAMES, 90, now)
    (tmp_path / "crt").write_bytes(server.cert)
    (tmp_path / "key").write_bytes(server.key)
    (tmp_path / "ca").write_bytes(ca.cert)
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(tmp_path / "crt", tmp_path / "key")
    cli = ssl.create_default_context(cafile=str(tmp_path / "ca"))
    a, b = ssl.MemoryBIO(), ssl.MemoryBIO()
    c, d = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = cli.wrap_bio(a, b, server_hostname="sluice-server.shop.svc")
    serv = srv.wrap_bio(c, d, server_side=True)
    for _ in range(10):  # bounded: a handshake takes a few round trips
        for side in (client, serv):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        c.write(b.read())
        a.write(d.read())
    client.do_handshake()  # raises if the chain or the name did not verify
    assert client.getpeercert()["subjectAltName"] == tuple(("DNS", n) for n in NAMES)


def test_fresh_certificate_needs_nothing(ca: selfsigned.KeyPair, server: selfsigned.KeyPair) -> None:
    assert selfsigned.server_reason(ca.cert, server, NAMES, NOW, 30 * DAY) == ""
    assert selfsigned.ca_usable(ca, NOW, 30 * DAY)


def test_renewal_window_generated(ca: selfsigned.KeyPair, server: selfsigned.KeyPair) -> None:
    """For random points in time and renewal windows: renew exactly when the
    remaining lifetime is within the window (or the certificate is not valid yet)."""
    rng = random.Random(18)
    not_after = x509.load_pem_x509_certificate(server.cert).not_valid_after_utc
    for _ in range(300):
        now = NOW + dt.timedelta(hours=rng.randint(-48, 24 * 100))
        window = dt.timedelta(days=rng.randint(1, 89))
        got = selfsigned.server_reason(ca.cert, server, NAMES, now, window)
        if now < NOW - selfsigned.BACKDATE:
            assert got == "not valid yet", (now, window)
        elif not_after - now <= window:
            assert got == "expires soon", (now, window)
        else:
            assert got == "", (now, window, got)


def test_reasons_to_issue_again(ca: selfsigned.KeyPair, server: selfsigned.KeyPair) -> None:
    other_ca = selfsigned.issue_ca("other", NOW)
    foreign = selfsigned.issue_server(other_ca, NAMES, 90, NOW)
    mixed = selfsigned.KeyPair(server.cert, foreign.key)
    cases = {
        "unreadable": selfsigned.KeyPair(b"not a certificate", server.key),
        "key does not match the certificate": mixed,
        "not issued by the CA": foreign,
    }
    for want, pair in cases.items():
        assert selfsigned.server_reason(ca.cert, pair, NAMES, NOW, 30 * DAY) == want
    assert selfsigned.server_reason(ca.cert, server, [*NAMES, "extra"], NOW, 30 * DAY) == "DNS names changed"


def test_server_certificate_never_outlives_its_ca() -> None:
    ca = selfsigned.issue_ca("short", NOW - dt.timedelta(days=selfsigned.CA_DAYS - 10))
    srv = selfsigned.issue_server(ca, NAMES, 90, NOW)
    ca_end = x509.load_pem_x509_certificate(ca.cert).not_valid_after_utc
    assert x509.load_pem_x509_certificate(srv.cert).not_valid_after_utc == ca_end
    assert not selfsigned.ca_usable(ca, NOW, 30 * DAY)
    assert not selfsigned.ca_usable(selfsigned.KeyPair(ca.cert, srv.key), NOW, DAY)


def test_config() -> None:
    c = Config.from_env({"SLUICE_OPERATOR_SERVER_TLS": "true", "SLUICE_OPERATOR_TLS_ISSUER": "ClusterIssuer/corp"})
    assert c.server_tls and c.tls_issuer == "ClusterIssuer/corp"
    assert c.server_url("shop") == "https://sluice-server.shop.svc:8888"
    assert Config().server_url("shop") == "http://sluice-server.shop.svc:8888"
    for bad in (
        {"SLUICE_OPERATOR_TLS_ISSUER": "corp"},
        {"SLUICE_OPERATOR_TLS_ISSUER": "Secret/corp"},
        {"SLUICE_OPERATOR_TLS_CERT_DAYS": "30", "SLUICE_OPERATOR_TLS_RENEW_DAYS": "30"},
        {"SLUICE_OPERATOR_SERVER_TLS": "maybe"},
    ):
        with pytest.raises(ConfigError):
            Config.from_env(bad)


def _tls_cfg(**kw: Any) -> Config:
    return Config(server_tls=True, **kw)


def test_server_deployment_mounts_and_probes_https() -> None:
    plain = sb.deployment(Config(), "shop", [])["spec"]["template"]["spec"]
    assert "tls" not in {v["name"] for v in plain["volumes"]}
    assert "scheme" not in plain["containers"][0]["readinessProbe"]["httpGet"]
    spec = sb.deployment(_tls_cfg(), "shop", [])["spec"]["template"]["spec"]
    c = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["SLUICE_TLS_CERT_FILE"] == tb.MOUNT + "/tls.crt" and env["SLUICE_TLS_KEY_FILE"] == tb.MOUNT + "/tls.key"
    assert {"name": "tls", "mountPath": tb.MOUNT, "readOnly": True} in c["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": tb.SECRET}} in spec["volumes"]
    assert {c[p]["httpGet"]["scheme"] for p in ("startupProbe", "readinessProbe", "livenessProbe")} == {"HTTPS"}
    sm = sb.service_monitor(_tls_cfg(), "shop", [])["spec"]["endpoints"][0]
    assert sm["scheme"] == "https" and sm["tlsConfig"]["ca"]["secret"] == {"name": tb.SECRET, "key": "ca.crt"}


def _bench(cfg: Config) -> dict[str, Any]:
    body = {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": "b", "namespace": "shop", "uid": "u1"},
        "spec": {"scenario": "task-distribution", "parallelism": 1, "target": {}, "placement": {}},
    }
    return bb.job(cfg, body, 1, "2026-06-01T00:00:00Z", 5)


def test_benchmark_pods_trust_the_server_ca() -> None:
    plain = _bench(Config())["spec"]["template"]["spec"]
    assert "server-ca" not in {v["name"] for v in plain.get("volumes", [])}
    assert "http://sluice-server.shop.svc:8888" in plain["containers"][0]["args"]
    spec = _bench(_tls_cfg())["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert "https://sluice-server.shop.svc:8888" in c["args"]
    assert {"name": "SSL_CERT_DIR", "value": tb.CA_MOUNT} in c["env"]
    assert {"name": "server-ca", "mountPath": tb.CA_MOUNT, "readOnly": True} in c["volumeMounts"]
    vol = next(v for v in spec["volumes"] if v["name"] == "server-ca")
    assert vol["secret"] == {"secretName": tb.SECRET, "optional": True, "items": [{"key": "ca.crt", "path": "ca.crt"}]}


def test_cert_manager_objects() -> None:
    own = [{"kind": "Pool", "name": "p", "uid": "1"}]
    chain = tb.cert_manager_objects(_tls_cfg(tls_cert_days=60, tls_renew_days=20), "shop", own)
    assert [(o["kind"], o["metadata"]["name"]) for o in chain] == [
        ("Issuer", tb.SELFSIGNED_ISSUER),
        ("Certificate", tb.CA_SECRET),
        ("Issuer", tb.CA_ISSUER),
        ("Certificate", tb.SECRET),
    ]
    cert = chain[-1]["spec"]
    assert cert["secretName"] == tb.SECRET and cert["dnsNames"] == NAMES
    assert cert["issuerRef"]["name"] == tb.CA_ISSUER and (cert["duration"], cert["renewBefore"]) == ("1440h", "480h")
    assert chain[1]["spec"]["isCA"] and chain[2]["spec"]["ca"]["secretName"] == tb.CA_SECRET
    assert all(o["metadata"]["ownerReferences"] == own for o in chain)
    only = tb.cert_manager_objects(_tls_cfg(tls_issuer="ClusterIssuer/corp"), "shop", own)
    assert len(only) == 1 and only[0]["spec"]["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "ClusterIssuer",
        "name": "corp",
    }


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store()
    for fn in ("get", "apply", "patch"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))
    monkeypatch.setattr(kube, "group_served", lambda gv: False)
    return s


def _secret(s: Store, name: str) -> dict[str, bytes]:
    obj = s.get("Secret", "shop", name) or {}
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


def test_handler_issues_once_then_renews_in_the_window(store: Store) -> None:
    cfg = _tls_cfg(tls_cert_days=90, tls_renew_days=30)
    assert th.ensure(cfg, "shop", [], NOW) == [f"Secret/{tb.CA_SECRET} issued", f"Secret/{tb.SECRET} issued (absent)"]
    first = _secret(store, tb.SECRET)
    ca = _secret(store, tb.CA_SECRET)
    assert first["ca.crt"] == ca["tls.crt"]
    # Nothing changes until the renewal window, then only the server certificate does.
    assert th.ensure(cfg, "shop", [], NOW + 59 * DAY) == []
    assert _secret(store, tb.SECRET) == first
    assert th.ensure(cfg, "shop", [], NOW + 61 * DAY) == [f"Secret/{tb.SECRET} issued (expires soon)"]
    second = _secret(store, tb.SECRET)
    assert second["tls.crt"] != first["tls.crt"] and _secret(store, tb.CA_SECRET) == ca
    assert (
        selfsigned.server_reason(
            ca["tls.crt"], selfsigned.KeyPair(second["tls.crt"], second["tls.key"]), NAMES, NOW + 61 * DAY, 30 * DAY
        )
        == ""
    )


def test_handler_replaces_a_broken_ca_and_reissues(store: Store) -> None:
    cfg = _tls_cfg()
    th.ensure(cfg, "shop", [], NOW)
    store.patch("Secret", "shop", tb.CA_SECRET, {"data": {"tls.key": base64.b64encode(b"garbage").decode()}})
    changed = th.ensure(cfg, "shop", [], NOW)
    assert changed == [f"Secret/{tb.CA_SECRET} issued", f"Secret/{tb.SECRET} issued (not issued by the CA)"]
    assert _secret(store, tb.SECRET)["ca.crt"] == _secret(store, tb.CA_SECRET)["tls.crt"]


def test_handler_off_and_with_cert_manager(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    assert th.ensure(Config(), "shop", [], NOW) == []
    assert store.objs == {}
    monkeypatch.setattr(kube, "group_served", lambda gv: gv == tb.CERT_MANAGER)
    changed = th.ensure(_tls_cfg(), "shop", [], NOW)
    assert changed[-1] == f"Certificate/{tb.SECRET} created"
    assert ("Secret", "shop", tb.CA_SECRET) not in store.objs  # cert-manager's job, not ours


def test_ca_file_follows_the_secret(store: Store, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(th.tempfile, "gettempdir", lambda: str(tmp_path))
    assert th.ca_file("shop") is True  # no Secret yet: the system roots
    th.ensure(_tls_cfg(), "shop", [], NOW)
    path = th.ca_file("shop")
    assert isinstance(path, str)
    with open(path, "rb") as f:
        assert f.read() == _secret(store, tb.CA_SECRET)["tls.crt"]
