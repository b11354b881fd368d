"""The certificates of a namespace (Config.server_tls; builders/tls.py): the
server's, and those of the backends the operator runs (ensure_backend;
builders/backend_tls.py). cert-manager objects when cert-manager is installed,
else the operator's own per-namespace CA and certificates issued again before
they expire.
Runs with every reconcile of the namespace's server, so renewal needs no
timer of its own. Never logs key material."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import tempfile
from typing import Any

from .. import kube, selfsigned
from ..builders import tls as tb
from ..config import Config


def _pair(secret: dict[str, Any] | None) -> selfsigned.KeyPair | None:
    data = (secret or {}).get("data") or {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        return None
    return selfsigned.KeyPair(base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"]))


def _put(obj: dict[str, Any], live: dict[str, Any] | None) -> None:
    """_put writes a Secret's data, replacing what is there (kube.apply never
    rotates Secret data, by design for passwords)."""
    if live is None:
        kube.apply(obj)
    else:
        kube.patch("Secret", obj["metadata"]["namespace"], obj["metadata"]["name"], {"data": obj["data"]})


def _ensure_ca(
    cfg: Config, ns: str, owners: list[dict[str, Any]], now: dt.datetime
) -> tuple[selfsigned.KeyPair, list[str]]:
    # The namespace's CA, made again when absent, broken or expiring.
    live_ca = kube.get("Secret", ns, tb.CA_SECRET)
    ca = _pair(live_ca)
    if ca is not None and selfsigned.ca_usable(ca, now, dt.timedelta(days=cfg.tls_renew_days)):
        return ca, []
    ca = selfsigned.issue_ca(f"sluice {ns} CA", now)
    _put(tb.ca_secret(cfg, ns, ca.cert, ca.key, owners), live_ca)
    return ca, [f"Secret/{tb.CA_SECRET} issued"]


def _ensure_leaf(
    cfg: Config,
    ns: str,
    name: str,
    component: str,
    names: list[str],
    ca: selfsigned.KeyPair,
    owners: list[dict[str, Any]],
    now: dt.datetime,
    client_auth: bool = False,
) -> list[str]:
    # A certificate for names in Secret `name`, issued again when server_reason
    # says so or when the Secret carries another CA.
    renew = dt.timedelta(days=cfg.tls_renew_days)
    live = kube.get("Secret", ns, name)
    pair = _pair(live)
    reason = "absent" if pair is None else selfsigned.server_reason(ca.cert, pair, names, now, renew)
    ca_in_secret = base64.b64decode(((live or {}).get("data") or {}).get(tb.CA_KEY, ""))
    if not reason and ca_in_secret == ca.cert:
        return []
    pair = selfsigned.issue_server(ca, names, cfg.tls_cert_days, now, client_auth=client_auth)
    _put(tb.leaf_secret(cfg, ns, name, component, pair.cert, pair.key, ca.cert, owners), live)
    return [f"Secret/{name} issued ({reason or 'CA changed'})"]


def ensure_selfsigned(cfg: Config, ns: str, owners: list[dict[str, Any]], now: dt.datetime) -> list[str]:
    """ensure_selfsigned keeps a usable CA and a valid server certificate in the
    namespace's Secrets; returns what it changed."""
    ca, changed = _ensure_ca(cfg, ns, owners, now)
    return changed + _ensure_leaf(cfg, ns, tb.SECRET, "server", tb.dns_names(cfg, ns), ca, owners, now)


def ensure_backend(
    cfg: Config,
    ns: str,
    secret: str,
    component: str,
    names: list[str],
    owners: list[dict[str, Any]],
    now: dt.datetime | None = None,
) -> list[str]:
    """ensure_backend provides the certificate of a backend the operator runs (a
    builtin shard, the catalog; builders/backend_tls.py) in Secret `secret`, from
    the same issuer and CA as the server's: a cert-manager Certificate when
    cert-manager is installed, else the operator's CA. Usable as a client
    certificate too (replication). Returns what it changed."""
    if not cfg.server_tls:
        return []
    if kube.group_served(tb.CERT_MANAGER):
        obj = tb.certificate(cfg, ns, secret, component, names, owners, client_auth=True)
        _, what = kube.apply(obj)
        return [] if what == "unchanged" else [f"Certificate/{secret} {what}"]
    now = now or dt.datetime.now(dt.UTC)
    ca, changed = _ensure_ca(cfg, ns, owners, now)
    return changed + _ensure_leaf(cfg, ns, secret, component, names, ca, owners, now, client_auth=True)


def ensure(cfg: Config, ns: str, owners: list[dict[str, Any]], now: dt.datetime | None = None) -> list[str]:
    """ensure provides the server certificate, by cert-manager when it is installed."""
    if not cfg.server_tls:
        return []
    if kube.group_served(tb.CERT_MANAGER):
        changed = []
        for obj in tb.cert_manager_objects(cfg, ns, owners):
            _, what = kube.apply(obj)
            if what != "unchanged":
                changed.append(f"{obj['kind']}/{obj['metadata']['name']} {what}")
        return changed
    return ensure_selfsigned(cfg, ns, owners, now or dt.datetime.now(dt.UTC))


def ca_file(ns: str) -> str | bool:
    """ca_file is what the operator verifies the namespace's server with: a file
    holding the Secret's ca.crt, or True (the system roots) when the issuer
    publishes none. The file is named by its content, so a new CA is a new file."""
    secret = kube.get("Secret", ns, tb.SECRET)
    raw = ((secret or {}).get("data") or {}).get(tb.CA_KEY)
    if not raw:
        return True
    pem = base64.b64decode(raw)
    d = os.path.join(tempfile.gettempdir(), "sluice-server-ca")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{ns}-{hashlib.sha256(pem).hexdigest()[:16]}.crt")
    if not os.path.exists(path):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(pem)
        os.replace(tmp, path)
    return path
