"""HTTPS for a namespace's sluice-server (Config.server_tls).

The server's certificate lives in Secret `sluice-server-tls` (type
kubernetes.io/tls: tls.crt, tls.key, and ca.crt, the CA that clients trust).
Who fills it:
- cert-manager, when its CRDs are served: a Certificate for the Service's
  DNS names from Config.tls_issuer, or, without one, from a per-namespace CA
  that cert-manager itself makes (self-signed Issuer -> CA Certificate ->
  CA Issuer, cert-manager's documented bootstrap), renewed by cert-manager;
- otherwise the operator (selfsigned.py, handlers/tls.py): a per-namespace
  CA in Secret `sluice-server-ca` and a server certificate it issues again
  before expiry.
The server mounts the Secret and reloads the files when the kubelet updates
them (--tls-cert-file/--tls-key-file); Benchmark pods mount its ca.crt and
trust it through SSL_CERT_DIR (Go's system-roots override); the operator
verifies the server with the same ca.crt.
"""

from __future__ import annotations

import base64
from typing import Any

from ..config import Config
from . import common

SECRET = "sluice-server-tls"
CA_SECRET = "sluice-server-ca"
CA_KEY = "ca.crt"
MOUNT = "/etc/sluice/tls"
CA_MOUNT = "/etc/sluice/server-ca"
CERT_MANAGER = "cert-manager.io/v1"
SELFSIGNED_ISSUER = "sluice-selfsigned"
CA_ISSUER = "sluice-ca"
CLUSTER_DOMAIN = "cluster.local"


def dns_names(cfg: Config, ns: str) -> list[str]:
    """dns_names are the names clients reach the server's Service by."""
    svc = common.SERVER_NAME
    return [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.{CLUSTER_DOMAIN}"]


def _meta(cfg: Config, name: str, ns: str, owners: list[dict[str, Any]], component: str = "server") -> dict[str, Any]:
    return {"name": name, "namespace": ns, "labels": common.labels(cfg, component), "ownerReferences": owners}


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def ca_secret(cfg: Config, ns: str, cert: bytes, key: bytes, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """ca_secret keeps the operator-generated CA of the namespace (certificate and key)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(cfg, CA_SECRET, ns, owners),
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(cert), "tls.key": _b64(key)},
    }


def server_secret(
    cfg: Config, ns: str, cert: bytes, key: bytes, ca_cert: bytes, owners: list[dict[str, Any]]
) -> dict[str, Any]:
    """server_secret is the server's certificate and key, with the CA that signed it."""
    return leaf_secret(cfg, ns, SECRET, "server", cert, key, ca_cert, owners)


def leaf_secret(
    cfg: Config,
    ns: str,
    name: str,
    component: str,
    cert: bytes,
    key: bytes,
    ca_cert: bytes,
    owners: list[dict[str, Any]],
) -> dict[str, Any]:
    """leaf_secret is a certificate and key issued by the namespace's CA, with that CA:
    the server's (SECRET) or a backend's (backend_tls.secret_name)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(cfg, name, ns, owners, component),
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(cert), "tls.key": _b64(key), CA_KEY: _b64(ca_cert)},
    }


def _issuer_ref(cfg: Config) -> dict[str, str]:
    if cfg.tls_issuer:
        kind, name = cfg.tls_issuer.split("/", 1)
        return {"group": "cert-manager.io", "kind": kind, "name": name}
    return {"group": "cert-manager.io", "kind": "Issuer", "name": CA_ISSUER}


def _hours(days: int) -> str:
    return f"{days * 24}h"


def cert_manager_objects(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """cert_manager_objects: the server's Certificate, preceded, when no issuer is
    configured, by the per-namespace CA chain it is issued from."""
    objs: list[dict[str, Any]] = []
    if not cfg.tls_issuer:
        objs += [
            {
                "apiVersion": CERT_MANAGER,
                "kind": "Issuer",
                "metadata": _meta(cfg, SELFSIGNED_ISSUER, ns, owners),
                "spec": {"selfSigned": {}},
            },
            {
                "apiVersion": CERT_MANAGER,
                "kind": "Certificate",
                "metadata": _meta(cfg, CA_SECRET, ns, owners),
                "spec": {
                    "isCA": True,
                    "commonName": f"sluice {ns} CA",
                    "secretName": CA_SECRET,
                    "duration": _hours(3650),
                    "privateKey": {"algorithm": "ECDSA", "size": 256},
                    "issuerRef": {"group": "cert-manager.io", "kind": "Issuer", "name": SELFSIGNED_ISSUER},
                },
            },
            {
                "apiVersion": CERT_MANAGER,
                "kind": "Issuer",
                "metadata": _meta(cfg, CA_ISSUER, ns, owners),
                "spec": {"ca": {"secretName": CA_SECRET}},
            },
        ]
    objs.append(certificate(cfg, ns, SECRET, "server", dns_names(cfg, ns), owners))
    return objs


def certificate(
    cfg: Config,
    ns: str,
    name: str,
    component: str,
    names: list[str],
    owners: list[dict[str, Any]],
    client_auth: bool = False,
) -> dict[str, Any]:
    """certificate is a cert-manager Certificate for names, written to Secret `name`,
    from the same issuer as the server's. client_auth adds the client usage, for
    backends whose replicas present the certificate to their primary."""
    usages = ["server auth", "digital signature"] + (["client auth"] if client_auth else [])
    return {
        "apiVersion": CERT_MANAGER,
        "kind": "Certificate",
        "metadata": _meta(cfg, name, ns, owners, component),
        "spec": {
            "secretName": name,
            # cert-manager wants a common name of at most 64 bytes; the SANs carry the rest.
            "commonName": names[0][:64],
            "dnsNames": names,
            "duration": _hours(cfg.tls_cert_days),
            "renewBefore": _hours(cfg.tls_renew_days),
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": usages,
            "issuerRef": _issuer_ref(cfg),
            # The Secret carries the operator's labels too.
            "secretTemplate": {"labels": common.labels(cfg, component)},
        },
    }


def serve_https(cfg: Config, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """serve_https makes the server container serve HTTPS from the mounted Secret
    (probes included); the server re-reads the files when they change."""
    if not cfg.server_tls:
        return
    container["env"] += [
        {"name": "SLUICE_TLS_CERT_FILE", "value": f"{MOUNT}/tls.crt"},
        {"name": "SLUICE_TLS_KEY_FILE", "value": f"{MOUNT}/tls.key"},
    ]
    container.setdefault("volumeMounts", []).append({"name": "tls", "mountPath": MOUNT, "readOnly": True})
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if "httpGet" in container.get(probe, {}):
            container[probe]["httpGet"]["scheme"] = "HTTPS"
    pod_spec.setdefault("volumes", []).append({"name": "tls", "secret": {"secretName": SECRET}})


def trust_server_ca(cfg: Config, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """trust_server_ca lets a Go client pod (sluice-bench) verify the server: the
    Secret's ca.crt becomes its only trusted root (SSL_CERT_DIR). Optional, so a
    pod still starts before the certificate is issued (it then fails to verify,
    and says so, rather than hanging in ContainerCreating)."""
    if not cfg.server_tls:
        return
    container.setdefault("env", []).append({"name": "SSL_CERT_DIR", "value": CA_MOUNT})
    container.setdefault("volumeMounts", []).append({"name": "server-ca", "mountPath": CA_MOUNT, "readOnly": True})
    pod_spec.setdefault("volumes", []).append(
        {
            "name": "server-ca",
            "secret": {"secretName": SECRET, "optional": True, "items": [{"key": CA_KEY, "path": CA_KEY}]},
        }
    )


def scheme(cfg: Config) -> str:
    """scheme is the URL scheme of the namespace's server."""
    return "https" if cfg.server_tls else "http"
