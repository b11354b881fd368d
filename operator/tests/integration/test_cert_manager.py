"""tls.enabled on a real apiserver with the real cert-manager (its controllers
built from the pinned module, e2e/cert-manager, `make cert-manager-binary`,
and the CRDs of that release): the operator creates the Issuers and
Certificates, cert-manager issues every Secret (the server's and the builtin
backends'), each chains to the namespace's cert-manager CA and names what the
workload is reached by, the workloads mount them, and a renewal (cmctl's
Issuing condition, or a deleted Secret) gives a new certificate that the
operator rolls out to the backend's pods. Something the operator did not
write has to agree with what it asks for."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from sluice_operator.builders import backend_tls, builtin
from sluice_operator.builders import server as sb

from ..support import ROOT, unavailable
from .conftest import (
    KUBECONFIG,
    Operator,
    apply,
    condition,
    drop_tls_namespace,
    get,
    kc,
    make_namespace,
    stop_process,
    wait_for,
)
from .test_pools import pool

BINARY = ROOT / "build/bin/cert-manager"
CRDS = ROOT / "build/cert-manager/crds"
LABEL = "sluice.dev/test=cert-manager"
SERVER, CA, CATALOG = "sluice-server-tls", "sluice-server-ca", "sluice-catalog-tls"
POOL = "cm"
SHARD = f"{POOL}-0"
SHARD_SECRET = backend_tls.secret_name(SHARD)


def _group_served() -> bool:
    return kc("get", "--raw", "/apis/cert-manager.io/v1", check=False).returncode == 0


def _need_build() -> None:
    if not BINARY.exists() or not list(CRDS.glob("*.yaml")):
        unavailable(f"{BINARY} or {CRDS} missing (make cert-manager-binary)")


@pytest.fixture(scope="module")
def cert_manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """cert-manager's CRDs and its controllers, watching every namespace; yields its log.
    The CRDs are removed again afterwards, unless a real installation had them: the
    rest of the suite runs without cert-manager."""
    _need_build()
    ours = not _group_served()
    if ours:
        for f in sorted(CRDS.glob("*.yaml")):
            kc("apply", "--server-side", "--field-manager=sluice-it", "-f", str(f))
            kc("label", "-f", str(f), LABEL, "--overwrite")
        for crd in ("certificates", "certificaterequests", "issuers", "clusterissuers"):
            kc("wait", "--for=condition=Established", f"crd/{crd}.cert-manager.io", "--timeout=60s")
    path = tmp_path_factory.mktemp("cm") / "cert-manager.log"
    log = path.open("w")
    proc = subprocess.Popen(
        [str(BINARY), "--kubeconfig", str(KUBECONFIG), "-v", "2"],
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            # Controllers that cannot start (no API, no CRDs) exit at once.
            proc.wait(timeout=5)
        if proc.poll() is not None:
            unavailable(f"cert-manager exited ({proc.returncode}): {path.read_text()[-2000:]}")
        yield path
    finally:
        stop_process(proc)
        log.close()
        if ours:
            kc("delete", "crd", "-l", LABEL, "--timeout=90s", check=False)
            wait_for("cert-manager.io/v1 no longer served", lambda: not _group_served(), timeout=90, interval=1)


@contextlib.contextmanager
def tls_namespace(kubeconfig: pathlib.Path, logs: pathlib.Path, **env: str) -> Iterator[str]:
    """A namespace with a TLS operator (and env) watching it, deleted afterwards."""
    ns = make_namespace("sit-cm")
    op = Operator(kubeconfig, ns, logs / f"operator-{ns}.log", {"SLUICE_OPERATOR_SERVER_TLS": "true", **env})
    try:
        yield ns
    finally:
        drop_tls_namespace(ns, op)


@pytest.fixture(scope="module")
def cm_ns(
    cert_manager: pathlib.Path, sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with tls_namespace(sa_kubeconfig, tmp_path_factory.mktemp("op")) as ns:
        yield ns


def server_names(ns: str) -> list[str]:
    return ["sluice-server", f"sluice-server.{ns}", f"sluice-server.{ns}.svc", f"sluice-server.{ns}.svc.cluster.local"]


def data(ns: str, name: str) -> dict[str, bytes]:
    secret = get("secret", ns, name) or {}
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def cert(raw: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(raw)


def sans(c: x509.Certificate) -> set[str]:
    ext = c.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return set(ext.value.get_values_for_type(x509.DNSName))


def ready(ns: str, name: str) -> dict[str, Any] | None:
    obj = get("certificate", ns, name)
    return obj if condition(obj, "Ready").get("status") == "True" else None


def check_issued(ns: str, secret: str, names: list[str], ca_pem: bytes, issuer: str = "sluice-ca") -> x509.Certificate:
    """check_issued: Secret `secret` was written by cert-manager for the Certificate of the
    same name, from Issuer `issuer`, and holds a certificate for exactly `names`
    signed by the namespace's CA, with that CA as ca.crt."""
    obj = get("secret", ns, secret) or {}
    ann = obj["metadata"].get("annotations") or {}
    assert ann.get("cert-manager.io/certificate-name") == secret, ann
    assert ann.get("cert-manager.io/issuer-name") == issuer, ann
    assert ann.get("cert-manager.io/issuer-kind") == "Issuer", ann
    assert obj["type"] == "kubernetes.io/tls"
    d = data(ns, secret)
    assert d["ca.crt"] == ca_pem
    leaf, ca = cert(d["tls.crt"]), cert(ca_pem)
    leaf.verify_directly_issued_by(ca)
    assert sans(leaf) == set(names)
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    return leaf


def test_installing_cert_manager_takes_over_the_certificates(
    request: pytest.FixtureRequest, sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A namespace already serving TLS from the operator's own CA when cert-manager is
    installed (first in this module: cert-manager is not there yet): cert-manager issues
    every certificate again, from its CA, and the operator rolls the backends onto them."""
    _need_build()
    if _group_served():
        pytest.skip("cert-manager is installed on this cluster already")
    with tls_namespace(sa_kubeconfig, tmp_path_factory.mktemp("op")) as ns:
        apply(pool(ns, POOL, shards=1, replicas=1, placement={"nodeClass": "any"}))
        old = wait_for("the operator's shard certificate rolled", lambda: _rolled(ns, SHARD, SHARD_SECRET), timeout=90)
        old_ca = data(ns, CA)["tls.crt"]
        assert "cert-manager.io/certificate-name" not in (
            (get("secret", ns, SERVER) or {})["metadata"].get("annotations") or {}
        )

        request.getfixturevalue("cert_manager")
        for name in (CA, SERVER, SHARD_SECRET):
            wait_for(f"Certificate {name} Ready", lambda n=name: ready(ns, n), timeout=120, interval=1)
            labels = (get("secret", ns, name) or {})["metadata"].get("labels") or {}
            assert labels.get("controller.cert-manager.io/fao") == "true", (name, labels)
        # cert-manager takes a Secret over as it is when it already matches the
        # Certificate (the operator's CA and certificates do: same subject, names, key
        # type and lifetimes), so clients keep trusting the same root; it issues the
        # next one itself, and the operator rolls the backend onto it.
        ca_pem = data(ns, CA)["tls.crt"]
        print("\ncert-manager kept the operator's CA" if ca_pem == old_ca else "\ncert-manager issued a new CA")
        for name in (SERVER, SHARD_SECRET):
            d = data(ns, name)
            assert d["ca.crt"] == ca_pem, name
            cert(d["tls.crt"]).verify_directly_issued_by(cert(ca_pem))
        before = data(ns, SHARD_SECRET)["tls.crt"]
        _renew(ns, SHARD_SECRET)
        wait_for("a certificate from cert-manager", lambda: _renewed(ns, SHARD_SECRET, before), timeout=120, interval=1)
        check_issued(ns, SHARD_SECRET, builtin.tls_names(SHARD, ns), ca_pem)
        new = wait_for("the shard rolled onto it", lambda: _rolled(ns, SHARD, SHARD_SECRET), timeout=60)
        assert new != old


def _renewed(ns: str, secret: str, before: bytes) -> bytes | None:
    """_renewed: the Secret holds another certificate than before and its Certificate is Ready."""
    now = data(ns, secret).get("tls.crt")
    return now if now and now != before and ready(ns, secret) else None


def test_cert_manager_issues_what_the_operator_asks_for(cm_ns: str) -> None:
    ns = cm_ns
    apply(pool(ns, POOL, shards=1, replicas=1, placement={"nodeClass": "any"}))
    wait_for("Certificate sluice-server-tls Ready", lambda: ready(ns, SERVER), timeout=120, interval=1)
    for issuer in ("sluice-selfsigned", "sluice-ca"):
        assert condition(get("issuer", ns, issuer), "Ready").get("status") == "True", issuer

    # The CA: self-signed by cert-manager for Certificate sluice-server-ca.
    ca_secret = get("secret", ns, CA) or {}
    assert (ca_secret["metadata"].get("annotations") or {}).get("cert-manager.io/issuer-name") == "sluice-selfsigned"
    ca_pem = data(ns, CA)["tls.crt"]
    ca = cert(ca_pem)
    assert ca.issuer == ca.subject and ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    leaf = check_issued(ns, SERVER, server_names(ns), ca_pem)
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    labels = (get("secret", ns, SERVER) or {})["metadata"].get("labels") or {}
    assert labels.get("app.kubernetes.io/managed-by") == "sluice-operator", labels

    dep = wait_for("Deployment sluice-server", lambda: get("deployment", ns, "sluice-server"), timeout=60)
    spec = dep["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": SERVER, "defaultMode": 420}} in spec["volumes"]
    status = wait_for("Pool status.server", lambda: ((get("pool", ns, POOL) or {}).get("status") or {}).get("server"))
    assert status.startswith("https://"), status

    # The backends the operator runs: a builtin shard and the catalog, also from cert-manager.
    wait_for("Certificate of the shard Ready", lambda: ready(ns, SHARD_SECRET), timeout=120, interval=1)
    wait_for("Certificate of the catalog Ready", lambda: ready(ns, CATALOG), timeout=120, interval=1)
    headless = f"{SHARD}-headless"
    shard_names = [SHARD, f"{SHARD}.{ns}", f"{SHARD}.{ns}.svc", f"{SHARD}.{ns}.svc.cluster.local"]
    shard_names += [f"*.{headless}.{ns}.svc", f"*.{headless}.{ns}.svc.cluster.local"]
    shard_leaf = check_issued(ns, SHARD_SECRET, shard_names, ca_pem)
    eku = shard_leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= set(eku)
    check_issued(ns, CATALOG, sb.catalog_tls_names(ns), ca_pem)
    for sts, secret in ((SHARD, SHARD_SECRET), ("sluice-catalog", CATALOG)):
        wait_for(f"StatefulSet {sts} rolled", lambda s=sts, c=secret: _rolled(ns, s, c), timeout=60)


def _template(ns: str, sts: str) -> dict[str, Any]:
    obj = get("statefulset", ns, sts) or {}
    return ((obj.get("spec") or {}).get("template") or {}) if obj else {}


def _rolled(ns: str, sts: str, secret: str) -> str | None:
    """_rolled: the StatefulSet's pod template names the certificate now in the Secret
    (so its pods run with it) and mounts that Secret; returns the digest."""
    want = backend_tls.digest(get("secret", ns, secret))
    tpl = _template(ns, sts)
    have = ((tpl.get("metadata") or {}).get("annotations") or {}).get(backend_tls.CERT_ANNOTATION)
    vols = [v.get("secret", {}).get("secretName") for v in (tpl.get("spec") or {}).get("volumes") or []]
    return have if want and have == want and secret in vols else None


def _renew(ns: str, name: str) -> None:
    """_renew does what `cmctl renew` does: the Certificate's Issuing condition, set True."""
    patch = [
        {
            "op": "add",
            "path": "/status/conditions/-",
            "value": {
                "type": "Issuing",
                "status": "True",
                "reason": "ManuallyTriggered",
                "message": "Certificate re-issuance manually triggered",
            },
        }
    ]
    kc("patch", "certificate", name, "-n", ns, "--subresource=status", "--type=json", "-p", json.dumps(patch))


@pytest.mark.parametrize("how", ["Issuing condition", "Secret deleted"])
def test_renewal_is_rolled_out(cm_ns: str, how: str) -> None:
    ns = cm_ns
    wait_for("shard certificate Ready", lambda: ready(ns, SHARD_SECRET), timeout=120, interval=1)
    old = wait_for("StatefulSet rolled", lambda: _rolled(ns, SHARD, SHARD_SECRET), timeout=60)
    old_server = data(ns, SERVER)["tls.crt"]
    old_shard = data(ns, SHARD_SECRET)["tls.crt"]
    ca_pem = data(ns, CA)["tls.crt"]
    if how == "Issuing condition":
        _renew(ns, SHARD_SECRET)
        _renew(ns, SERVER)
    else:
        kc("delete", "secret", SHARD_SECRET, SERVER, "-n", ns)

    new_shard = wait_for("a new shard certificate", lambda: _renewed(ns, SHARD_SECRET, old_shard), timeout=120)
    new_server = wait_for("a new server certificate", lambda: _renewed(ns, SERVER, old_server), timeout=120)
    assert cert(new_shard).serial_number != cert(old_shard).serial_number
    assert cert(new_server).serial_number != cert(old_server).serial_number
    # The CA stays: whoever trusts it trusts the new certificates, which name the same hosts.
    assert data(ns, CA)["tls.crt"] == ca_pem
    check_issued(ns, SHARD_SECRET, sorted(sans(cert(old_shard))), ca_pem)
    check_issued(ns, SERVER, sorted(sans(cert(old_server))), ca_pem)
    # The operator rolls the shard's pods onto the new certificate; the server keeps
    # mounting its Secret and reloads the files itself.
    new = wait_for("StatefulSet rolled to the new certificate", lambda: _rolled(ns, SHARD, SHARD_SECRET), timeout=60)
    assert new != old and new == backend_tls.digest(get("secret", ns, SHARD_SECRET))
    spec = (get("deployment", ns, "sluice-server") or {})["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": SERVER, "defaultMode": 420}} in spec["volumes"]


def test_configured_issuer_is_used(
    cert_manager: pathlib.Path, sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """tls.issuer (SLUICE_OPERATOR_TLS_ISSUER=Issuer/corp-ca): a CA Issuer of the user's
    own issues the server's and the backends' certificates; the operator makes no CA."""
    with tls_namespace(sa_kubeconfig, tmp_path_factory.mktemp("op"), SLUICE_OPERATOR_TLS_ISSUER="Issuer/corp-ca") as ns:
        meta = {"namespace": ns}
        root = {"group": "cert-manager.io", "kind": "Issuer", "name": "corp-root"}
        for obj in (
            {"kind": "Issuer", "metadata": {"name": "corp-root", **meta}, "spec": {"selfSigned": {}}},
            {
                "kind": "Certificate",
                "metadata": {"name": "corp-ca", **meta},
                "spec": {"isCA": True, "commonName": "corp CA", "secretName": "corp-ca", "issuerRef": root},
            },
            {"kind": "Issuer", "metadata": {"name": "corp-ca", **meta}, "spec": {"ca": {"secretName": "corp-ca"}}},
        ):
            apply({"apiVersion": "cert-manager.io/v1", **obj})
        apply(pool(ns, POOL, shards=1, replicas=1, placement={"nodeClass": "any"}))
        for name in (SERVER, SHARD_SECRET, CATALOG):
            wait_for(f"Certificate {name} Ready", lambda n=name: ready(ns, n), timeout=120, interval=1)
        corp = data(ns, "corp-ca")["tls.crt"]
        check_issued(ns, SERVER, server_names(ns), corp, issuer="corp-ca")
        check_issued(ns, SHARD_SECRET, builtin.tls_names(SHARD, ns), corp, issuer="corp-ca")
        check_issued(ns, CATALOG, sb.catalog_tls_names(ns), corp, issuer="corp-ca")
        for name in ("sluice-selfsigned", "sluice-ca"):
            assert get("issuer", ns, name) is None, name
        assert get("certificate", ns, CA) is None and get("secret", ns, CA) is None
        wait_for("the shard rolled", lambda: _rolled(ns, SHARD, SHARD_SECRET), timeout=60)
