"""TLS between sluice-server and the backends the operator runs itself
(builtin Redis and MongoDB shards, the builtin catalog), on whenever the
namespace's server serves HTTPS (Config.server_tls).

Each such workload gets its own certificate, Secret `<workload>-tls`
(tls.crt, tls.key, ca.crt), issued by the same owner and from the same CA as
the server's (handlers/tls.py: the operator's per-namespace CA, or
cert-manager), for its client Service and its pods' DNS names. The backend
serves TLS only; the server reaches it as `rediss://...?tls_ca_file=` or
`mongodb://...?tls=true&tlsCAFile=`, trusting the ca.crt of its own mounted
Secret (the same CA). Passwords stay as they are.

Renewal restarts the backend: its pod template carries a digest of the
certificate (CERT_ANNOTATION), so a renewed certificate rolls the
StatefulSet. redis-server could take a new certificate with `CONFIG SET
tls-cert-file`, but the operator cannot tell when the kubelet has updated
the mounted files; a restart is the moment the files are known to be new.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any
from urllib.parse import quote

from . import tls

MOUNT = "/etc/sluice/backend-tls"
VOLUME = "backend-tls"
CERT_ANNOTATION = "sluice.dev/tls-cert-sha256"
# mongod reads certificate and key from one file; it is assembled from the
# Secret's two keys at start, in the pod's /tmp (an emptyDir).
MONGO_PEM = "/tmp/mongod.pem"


def secret_name(workload: str) -> str:
    """secret_name is the Secret holding a backend workload's certificate."""
    return f"{workload}-tls"


def dns_names(service: str, ns: str, headless: str | None = None) -> list[str]:
    """dns_names are the names a backend is reached by: its client Service and,
    through the governing Service, each of its pods (replication, replica-set
    members)."""
    domain = tls.CLUSTER_DOMAIN
    names = [service, f"{service}.{ns}", f"{service}.{ns}.svc", f"{service}.{ns}.svc.{domain}"]
    if headless:
        names += [f"*.{headless}.{ns}.svc", f"*.{headless}.{ns}.svc.{domain}"]
    return names


def server_ca_file() -> str:
    """server_ca_file is where sluice-server finds the CA that signed the backends:
    the ca.crt of its own mounted certificate Secret (one CA per namespace)."""
    return f"{tls.MOUNT}/{tls.CA_KEY}"


def digest(secret: dict[str, Any] | None) -> str:
    """digest identifies the certificate in a backend's Secret ("" before it is
    issued); a change restarts the backend's pods."""
    raw = ((secret or {}).get("data") or {}).get("tls.crt") or ""
    return hashlib.sha256(raw.encode()).hexdigest()[:16] if raw else ""


def redis_args(port: int) -> str:
    """redis_args make redis-server serve TLS only on its usual port: no plain
    port, replication over TLS, no client certificates (clients authenticate
    with the password, as before)."""
    return (
        f"--port 0 --tls-port {port} --tls-cert-file {MOUNT}/tls.crt --tls-key-file {MOUNT}/tls.key "
        f"--tls-ca-cert-file {MOUNT}/{tls.CA_KEY} --tls-auth-clients no --tls-replication yes"
    )


def mongo_command(mongod: list[str]) -> list[str]:
    """mongo_command wraps a mongod command line so that it requires TLS with the
    mounted certificate; members verify each other with the CA, clients need
    no certificate of their own."""
    tls_args = [
        "--tlsMode",
        "requireTLS",
        "--tlsCertificateKeyFile",
        MONGO_PEM,
        "--tlsCAFile",
        f"{MOUNT}/{tls.CA_KEY}",
        "--tlsAllowConnectionsWithoutCertificates",
    ]
    line = " ".join(shlex.quote(a) for a in mongod + tls_args)
    script = f"umask 077; cat {MOUNT}/tls.crt {MOUNT}/tls.key > {MONGO_PEM}; exec {line}"
    return ["sh", "-c", script]


def mount(
    container: dict[str, Any], pod_spec: dict[str, Any], template: dict[str, Any], workload: str, dig: str
) -> None:
    """mount gives a backend container its certificate Secret (read-only) and
    stamps the pod template with the certificate's digest."""
    container.setdefault("volumeMounts", []).append({"name": VOLUME, "mountPath": MOUNT, "readOnly": True})
    pod_spec.setdefault("volumes", []).append({"name": VOLUME, "secret": {"secretName": secret_name(workload)}})
    template.setdefault("metadata", {}).setdefault("annotations", {})[CERT_ANNOTATION] = dig


def mongo_query(ca_file: str) -> str:
    """mongo_query are the MongoDB URI options requiring TLS trusting ca_file."""
    return "tls=true&tlsCAFile=" + quote(ca_file, safe="/")
