"""Backend TLS (builders/backend_tls.py): with the namespace's TLS on, builtin
Redis and MongoDB shards and the builtin catalog serve TLS only, with a
certificate the namespace's issuer makes for their DNS names; the server
reaches them over TLS trusting its mounted CA; the operator probes them with
its own copy of that CA. Builders, the issuing handler on an in-memory
apiserver, a Pool reconcile, and the builders' redis-server arguments run by
the real redis-server (TLS only, replication over TLS)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import shlex
import ssl
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from sluice_operator import kube, probes, selfsigned
from sluice_operator.builders import backend_tls as bt
from sluice_operator.builders import builtin, common
from sluice_operator.builders import server as sb
from sluice_operator.builders import tls as tb
from sluice_operator.config import Config
from sluice_operator.handlers import provisioning
from sluice_operator.handlers import server as server_handler
from sluice_operator.handlers import tls as th
from sluice_operator.serverapi import ServerAPI

from ..support import Processes, free_port, need_program, wait_port
from .conftest import make_pool
from .kube_double import Store
from .test_reconcile import cond, run_pool, store  # noqa: F401  (fixture)
from .zaqar_double import ZaqarDouble

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
PW = "pw-Abc_123-xyz"
SERVER_CA = "/etc/sluice/tls/ca.crt"


def _tls(**kw: Any) -> Config:
    return Config(server_tls=True, **kw)


def _container(sts: dict[str, Any]) -> dict[str, Any]:
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    return c


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.parametrize("replicas", [1, 3])
def test_builtin_redis_serves_tls_only(replicas: int) -> None:
    pool = make_pool(provisioner="builtin", replicas=replicas)
    sts = builtin.statefulset(_tls(), pool, 1, "d1g")
    c, spec = _container(sts), sts["spec"]["template"]["spec"]
    script = c["command"][-1]
    for branch in script.split("; else "):  # primary and replica lines alike
        assert "--port 0 --tls-port 6379" in branch and "--port 6379" not in branch
        assert f"--tls-cert-file {bt.MOUNT}/tls.crt --tls-key-file {bt.MOUNT}/tls.key" in branch
        assert "--tls-auth-clients no" in branch and "--tls-replication yes" in branch
        assert "requirepass" in branch  # the password stays
    assert "--replicaof web-1-0.web-1-headless.shop.svc 6379" in script
    assert {"name": bt.VOLUME, "mountPath": bt.MOUNT, "readOnly": True} in c["volumeMounts"]
    assert {"name": bt.VOLUME, "secret": {"secretName": "web-1-tls"}} in spec["volumes"]
    assert sts["spec"]["template"]["metadata"]["annotations"] == {bt.CERT_ANNOTATION: "d1g"}
    # A renewed certificate changes the pod template: the pods restart on it.
    assert builtin.statefulset(_tls(), pool, 1, "other")["spec"]["template"] != sts["spec"]["template"]


def test_tls_off_changes_nothing() -> None:
    pool = make_pool(provisioner="builtin", replicas=2)
    sts = builtin.statefulset(Config(), pool, 0, "ignored")
    text = json.dumps(sts)
    assert "tls" not in text and "--port 6379" in _container(sts)["command"][-1]
    assert "annotations" not in sts["spec"]["template"]["metadata"]
    cat = sb.catalog_statefulset(Config(), "shop", [])
    assert "tls" not in json.dumps(cat)
    assert builtin.shard_uri("redis", "web-0", "shop", 1, PW) == f"redis://:{PW}@web-0.shop.svc:6379/0"


def test_builtin_mongo_requires_tls() -> None:
    pool = make_pool(provisioner="builtin", backend="mongodb", image="mongo:7", replicas=3)
    sts = builtin.statefulset(_tls(), pool, 0, "d")
    c = _container(sts)
    assert c["command"][:2] == ["sh", "-c"]
    script = c["command"][2]
    # mongod wants certificate and key in one file: made in the pod's /tmp, owner-only.
    assert script.startswith(f"umask 077; cat {bt.MOUNT}/tls.crt {bt.MOUNT}/tls.key > {bt.MONGO_PEM}; exec mongod ")
    args = shlex.split(script.split("exec ", 1)[1])
    assert args[args.index("--tlsMode") + 1] == "requireTLS"
    assert args[args.index("--tlsCertificateKeyFile") + 1] == bt.MONGO_PEM
    assert args[args.index("--tlsCAFile") + 1] == f"{bt.MOUNT}/ca.crt"
    assert "--tlsAllowConnectionsWithoutCertificates" in args and args[args.index("--replSet") + 1] == "web-0"
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    uri = builtin.shard_uri("mongodb", "web-0", "shop", 3, tls_ca=SERVER_CA)
    q = parse_qs(urlsplit(uri).query)
    assert q == {"replicaSet": ["web-0"], "tls": ["true"], "tlsCAFile": [SERVER_CA]}
    single = builtin.shard_uri("mongodb", "web-0", "shop", 1, tls_ca=SERVER_CA)
    assert single == f"mongodb://web-0.shop.svc:27017/?directConnection=true&tls=true&tlsCAFile={SERVER_CA}"


def test_catalog_serves_tls_and_the_server_trusts_its_ca() -> None:
    cfg = _tls()
    cat = sb.catalog_statefulset(cfg, "shop", [], "cd")
    c, spec = _container(cat), cat["spec"]["template"]["spec"]
    assert "--port 0 --tls-port 6379" in c["command"][-1]
    assert {"name": bt.VOLUME, "secret": {"secretName": "sluice-catalog-tls"}} in spec["volumes"]
    # The catalog gets its own certificate, never the server's key.
    assert tb.SECRET not in json.dumps(spec) and "SLUICE_TLS" not in json.dumps(c)
    dep = sb.deployment(cfg, "shop", [])
    sc = _container(dep)
    env = _env(sc)
    base = "rediss://:$(CATALOG_PASSWORD)@sluice-catalog.shop.svc:6379"
    assert env["SLUICE_CATALOG"] == f"{base}/0?tls_ca_file={SERVER_CA}"
    assert env["SLUICE_STORE"] == f"{base}/1?tls_ca_file={SERVER_CA}"
    # The CA file the URIs name is the ca.crt of the server's own mounted Secret.
    (mount,) = [m for m in sc["volumeMounts"] if m["mountPath"] == tb.MOUNT]
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert vols[mount["name"]]["secret"]["secretName"] == tb.SECRET and bt.server_ca_file() == SERVER_CA


def _matches(name: str, pattern: str) -> bool:
    # RFC 6125 as TLS stacks apply it: a wildcard stands for exactly one left-most label.
    if pattern.startswith("*."):
        head, _, rest = name.partition(".")
        return bool(head) and rest == pattern[2:]
    return name == pattern


def _handshake(ca: bytes, pair: selfsigned.KeyPair, hostname: str, tmp: Any) -> None:
    """A real OpenSSL handshake in memory: a client trusting only ca, checking hostname."""
    (tmp / "crt").write_bytes(pair.cert)
    (tmp / "key").write_bytes(pair.key)
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(tmp / "crt", tmp / "key")
    cli = ssl.create_default_context(cadata=ca.decode())
    a, b, c, d = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = cli.wrap_bio(a, b, server_hostname=hostname)
    server = srv.wrap_bio(c, d, server_side=True)
    done = False
    for _ in range(10):  # bounded: a handshake takes a few round trips
        for side in (client, server):
            try:
                side.do_handshake()
                done = side is client or done
            except ssl.SSLWantReadError:
                pass
        c.write(b.read())
        a.write(d.read())
    assert done and client.getpeercert(), hostname


def test_generated_shards_certificates_cover_every_name_they_are_reached_by(tmp_path: Any) -> None:
    """For generated pools (names, namespaces, shard index, replicas), the certificate
    the operator issues covers the host of the URI the server is given and the DNS
    name of every pod (replication, replica-set members), and nothing is left to a
    name outside the shard: a sibling shard's names do not match."""
    rnd = random.Random(18)
    now = dt.datetime.now(dt.UTC)
    ca = selfsigned.issue_ca("test CA", now)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    for _ in range(12):
        pool = rnd.choice("abcdefghij") + "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 20)))
        ns = rnd.choice("klmnop") + "".join(rnd.choice(alphabet + "-") for _ in range(rnd.randint(0, 15))) + "x"
        index, replicas = rnd.randint(0, 12), rnd.randint(1, 5)
        backend = rnd.choice(["redis", "mongodb"])
        shard = common.shard_name(pool, index)
        names = builtin.tls_names(shard, ns)
        pair = selfsigned.issue_server(ca, names, 90, now, client_auth=True)
        uri = builtin.shard_uri(backend, shard, ns, replicas, PW, SERVER_CA)
        hosts = [h.rsplit(":", 1)[0] for h in urlsplit(uri).netloc.rsplit("@", 1)[-1].split(",")]
        hosts += [f"{shard}-{i}.{builtin.headless_name(shard)}.{ns}.svc" for i in range(replicas)]
        for host in hosts:
            assert any(_matches(host, n) for n in names), (host, names)
        _handshake(ca.cert, pair, rnd.choice(hosts), tmp_path)
        sibling = f"{common.shard_name(pool, index + 1)}.{ns}.svc"
        assert not any(_matches(sibling, n) for n in names)
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(ca.cert, pair, sibling, tmp_path)


@pytest.fixture
def kstore(monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store()
    for fn in ("get", "apply", "patch"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))
    monkeypatch.setattr(kube, "group_served", lambda gv: False)
    return s


def _data(s: Store, name: str) -> dict[str, bytes]:
    obj = s.get("Secret", "shop", name) or {}
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


def test_backend_certificate_from_the_servers_ca_renewed_in_the_window(kstore: Store) -> None:
    cfg = _tls(tls_cert_days=90, tls_renew_days=30)
    names = builtin.tls_names("web-0", "shop")
    assert th.ensure_backend(Config(), "shop", "web-0-tls", "backend", names, [], NOW) == []
    assert kstore.objs == {}
    th.ensure(cfg, "shop", [], NOW)
    assert th.ensure_backend(cfg, "shop", "web-0-tls", "backend", names, [], NOW) == [
        "Secret/web-0-tls issued (absent)"
    ]
    first, ca = _data(kstore, "web-0-tls"), _data(kstore, tb.CA_SECRET)
    # The same CA as the server's: the server verifies the backend with its own ca.crt.
    assert first["ca.crt"] == ca["tls.crt"] == _data(kstore, tb.SECRET)["ca.crt"]
    cert = x509.load_pem_x509_certificate(first["tls.crt"])
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in eku and ExtendedKeyUsageOID.SERVER_AUTH in eku
    meta = (kstore.get("Secret", "shop", "web-0-tls") or {})["metadata"]
    assert meta["labels"][common.LABEL_COMPONENT] == "backend"
    assert th.ensure_backend(cfg, "shop", "web-0-tls", "backend", names, [], NOW + 59 * DAY) == []
    assert th.ensure_backend(cfg, "shop", "web-0-tls", "backend", names, [], NOW + 61 * DAY) == [
        "Secret/web-0-tls issued (expires soon)"
    ]
    digest = bt.digest(kstore.get("Secret", "shop", "web-0-tls"))
    assert digest and digest != bt.digest({"data": {"tls.crt": base64.b64encode(first["tls.crt"]).decode()}})
    # A new CA (the old one broken) reissues the backend's certificate too.
    kstore.patch("Secret", "shop", tb.CA_SECRET, {"data": {"tls.key": base64.b64encode(b"garbage").decode()}})
    changed = th.ensure_backend(cfg, "shop", "web-0-tls", "backend", names, [], NOW + 61 * DAY)
    assert changed == [f"Secret/{tb.CA_SECRET} issued", "Secret/web-0-tls issued (not issued by the CA)"]
    assert _data(kstore, "web-0-tls")["ca.crt"] == _data(kstore, tb.CA_SECRET)["tls.crt"]


def test_backend_certificate_with_cert_manager(kstore: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "group_served", lambda gv: gv == tb.CERT_MANAGER)
    for cfg in (_tls(), _tls(tls_issuer="ClusterIssuer/corp")):
        names = sb.catalog_tls_names("shop")
        changed = th.ensure_backend(cfg, "shop", "sluice-catalog-tls", "catalog", names, [], NOW)
        assert changed and changed[0].startswith("Certificate/sluice-catalog-tls ")
        crt = kstore.get("Certificate", "shop", "sluice-catalog-tls") or {}
        server_crt = tb.cert_manager_objects(cfg, "shop", [])[-1]
        assert crt["spec"]["issuerRef"] == server_crt["spec"]["issuerRef"]
        assert crt["spec"]["dnsNames"] == names and crt["spec"]["secretName"] == "sluice-catalog-tls"
        assert "client auth" in crt["spec"]["usages"]
    assert ("Secret", "shop", "sluice-catalog-tls") not in kstore.objs  # cert-manager's job


def test_builtin_pool_over_tls_registers_rediss_and_probes_with_the_ca(
    store: Store,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zaqar = ZaqarDouble()
    try:
        cfg = _tls(probe_timeout=0.5)
        store.apply(
            {
                "kind": "Secret",
                "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
                "stringData": {"token": zaqar.state.token},
            }
        )
        # The double speaks plain HTTP; the server's own HTTPS is test_tls.py's subject.
        monkeypatch.setattr(server_handler, "api", lambda c, ns: ServerAPI(zaqar.url, zaqar.state.token, 5.0))
        pool = make_pool(provisioner="builtin", shards=1)
        pool["metadata"]["uid"] = "u1"
        store.apply(pool)
        probed: list[tuple[str, str | None]] = []
        monkeypatch.setattr(probes, "probe", lambda uri, t, ca=None: (probed.append((uri, ca)) is None, "PONG"))
        p = run_pool(cfg, store)
        password = (store.get("Secret", "shop", "web-0-redis-auth") or {})["stringData"]["password"]
        registered = zaqar.state.pools["web-0"]["uri"]
        assert registered == f"rediss://:{password}@web-0.shop.svc:6379/0?tls_ca_file={SERVER_CA}"
        ((uri, ca_file),) = probed
        assert uri == registered and ca_file
        with open(ca_file, "rb") as f:
            assert f.read() == _data(store, tb.CA_SECRET)["tls.crt"]
        assert cond(p, "Ready")["status"] == "True"
        shard_secret = _data(store, "web-0-tls")
        sts = store.get("StatefulSet", "shop", "web-0") or {}
        first = sts["spec"]["template"]["metadata"]["annotations"][bt.CERT_ANNOTATION]
        assert first == bt.digest(store.get("Secret", "shop", "web-0-tls"))
        cat = store.get("StatefulSet", "shop", common.CATALOG_NAME) or {}
        assert cat["spec"]["template"]["metadata"]["annotations"][bt.CERT_ANNOTATION] == bt.digest(
            store.get("Secret", "shop", "sluice-catalog-tls")
        )
        # No key material (nor the password) in status.
        status = json.dumps(p["status"])
        for secret in (shard_secret["tls.key"], _data(store, "sluice-catalog-tls")["tls.key"]):
            body = secret.decode().splitlines()[1]
            assert body not in status and base64.b64encode(secret).decode()[:40] not in status
        assert "PRIVATE KEY" not in status and password not in status
        # Unchanged on the next reconcile; a certificate issued again rolls the pods.
        run_pool(cfg, store)
        assert (store.get("StatefulSet", "shop", "web-0") or {})["spec"]["template"]["metadata"]["annotations"][
            bt.CERT_ANNOTATION
        ] == first
        store.patch("Secret", "shop", "web-0-tls", {"data": {"tls.crt": base64.b64encode(b"junk").decode()}})
        run_pool(cfg, store)
        again = (store.get("StatefulSet", "shop", "web-0") or {})["spec"]["template"]["metadata"]["annotations"]
        assert again[bt.CERT_ANNOTATION] not in (first, bt.digest({"data": {"tls.crt": "anVuaw=="}}))
    finally:
        zaqar.stop()


def test_uri_of_builtin_over_tls() -> None:
    body = make_pool(provisioner="builtin", shards=1)
    uri = provisioning.uri_of(body, "builtin", 0, None, password="p w", backend_tls_on=True)
    assert uri == f"rediss://:p%20w@web-0.shop.svc:6379/0?tls_ca_file={SERVER_CA}"
    # Other provisioners are not the operator's to secure this way.
    assert provisioning.uri_of(body, "redis-operator", 0, None, backend_tls_on=True) == "redis://web-0.shop.svc:6379/0"


def _redis_tls_server(procs: Processes, tmp: Any, pair: selfsigned.KeyPair, ca: bytes, extra: str = "") -> int:
    """The builders' TLS arguments (backend_tls.redis_args, the mount pointed at tmp)
    and the builders' password line, run by sh against the real redis-server."""
    need_program("redis-server")
    tmp.mkdir(parents=True, exist_ok=True)
    for name, raw in (("tls.crt", pair.cert), ("tls.key", pair.key), ("ca.crt", ca)):
        (tmp / name).write_bytes(raw)
    port = free_port()
    args = bt.redis_args(port).replace(bt.MOUNT, str(tmp))
    line = common.redis_with_password(f"{args} --bind 127.0.0.1 --dir {tmp} --save '' {extra}")
    line = line.replace("/tmp/redis-auth.conf", f"{tmp}/redis-auth.conf")
    procs.start(["sh", "-c", line], log=tmp / "redis.log", env={"REDIS_PASSWORD": PW, "PATH": "/usr/bin:/bin"})
    assert wait_port(port, 10), (tmp / "redis.log").read_text()
    return port


def test_real_redis_serves_tls_only_and_replicates_over_tls(tmp_path: Any) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = selfsigned.issue_ca("test CA", now)
    # The shard is reached as localhost here: the name stands in for its Service name.
    pair = selfsigned.issue_server(ca, ["localhost", *builtin.tls_names("web-0", "shop")], 90, now, client_auth=True)
    (tmp_path / "op-ca.crt").write_bytes(ca.cert)
    op_ca = str(tmp_path / "op-ca.crt")
    procs = Processes()
    try:
        port = _redis_tls_server(procs, tmp_path / "primary", pair, ca.cert)
        uri = common.redis_uri("localhost", port, 0, PW, SERVER_CA)  # as registered: the server's CA path
        ok, msg = probes.probe(uri, 2.0, op_ca)
        assert ok, msg
        # Plain TCP gets no answer from the TLS-only port.
        ok, msg = probes.probe(common.redis_uri("localhost", port, 0, PW), 2.0)
        assert not ok, msg
        # Another CA's client refuses the shard; the right CA without the password is refused by it.
        other = selfsigned.issue_ca("other CA", now)
        (tmp_path / "other.crt").write_bytes(other.cert)
        ok, msg = probes.probe(uri, 2.0, str(tmp_path / "other.crt"))
        assert not ok and "certificate" in msg.lower(), msg
        ok, msg = probes.probe(common.redis_uri("localhost", port, 0, None, SERVER_CA), 2.0, op_ca)
        assert not ok and "AUTH" in msg.upper(), msg
        # A replica started with the same arguments follows the primary over TLS.
        rport = _redis_tls_server(procs, tmp_path / "replica", pair, ca.cert, f"--replicaof localhost {port}")
        primary = redis.Redis(host="localhost", port=port, password=PW, ssl=True, ssl_ca_certs=op_ca)
        replica = redis.Redis(host="localhost", port=rport, password=PW, ssl=True, ssl_ca_certs=op_ca)
        primary.set("k", "v")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and replica.get("k") != b"v":
            time.sleep(0.2)
        assert replica.info("replication")["master_link_status"] == "up"
        assert replica.get("k") == b"v"
        primary.close()
        replica.close()
    finally:
        procs.stop()


def test_tls_pods_pass_the_restricted_standard() -> None:
    from .test_security import _pod_specs, restricted_violations

    for what, pod in _pod_specs(_tls()).items():
        assert restricted_violations(pod) == [], what
        if what != "server":
            assert {"name": bt.VOLUME, "mountPath": bt.MOUNT, "readOnly": True} in pod["containers"][0]["volumeMounts"]
