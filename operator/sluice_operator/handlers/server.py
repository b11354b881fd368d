"""The namespace's sluice-server and catalog: created with the first Pool,
owned by every Pool of the namespace, gone with the last one."""

from __future__ import annotations

import base64
import secrets
from typing import Any

from .. import kube
from ..builders import backend_tls, common, netpol
from ..builders import server as sb
from ..config import Config
from ..serverapi import ServerAPI
from . import tls


def owners(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """owners are non-controller references to every live Pool of the namespace."""
    live = [p for p in pools if not p["metadata"].get("deletionTimestamp")]
    live.sort(key=lambda p: p["metadata"]["name"])
    return [common.owner_ref({**p, "kind": "Pool"}, controller=False) for p in live]


def desired(
    cfg: Config, ns: str, refs: list[dict[str, Any]], monitoring: bool, catalog_tls: str = ""
) -> list[dict[str, Any]]:
    """desired lists the server's objects (without the admin Secret, which is created once);
    catalog_tls is the digest of the builtin catalog's certificate."""
    objs = [sb.deployment(cfg, ns, refs), sb.service(cfg, ns, refs), sb.pdb(cfg, ns, refs)]
    if not cfg.catalog_uri:
        objs += [sb.catalog_statefulset(cfg, ns, refs, catalog_tls), sb.catalog_service(cfg, ns, refs)]
    if monitoring:
        objs.append(sb.service_monitor(cfg, ns, refs))
    return objs + netpol.desired(cfg, ns, refs)


def admin_token(ns: str) -> str | None:
    """admin_token reads the server's admin token, None before the Secret exists."""
    secret = kube.get("Secret", ns, common.ADMIN_SECRET)
    raw = ((secret or {}).get("data") or {}).get("token")
    return base64.b64decode(raw).decode() if raw else None


def ensure(cfg: Config, ns: str, pool: dict[str, Any]) -> str:
    """ensure creates or updates the namespace's server with `pool` among its owners,
    and returns a one-line summary of what changed."""
    pools = kube.list_objects("Pool", ns)
    if not any(p["metadata"]["uid"] == pool["metadata"]["uid"] for p in pools):
        pools.append(pool)
    refs = owners(pools)
    if not refs:
        return "no live Pool owns the server"
    changed = []
    if admin_token(ns) is None:
        kube.apply(sb.admin_secret(cfg, ns, secrets.token_urlsafe(32), refs))
        changed.append("Secret/" + common.ADMIN_SECRET)
    elif adopt_secret(ns, common.ADMIN_SECRET, refs):
        changed.append(f"Secret/{common.ADMIN_SECRET} owners")
    if not cfg.catalog_uri and kube.get("Secret", ns, common.CATALOG_SECRET) is None:
        kube.apply(sb.catalog_secret(cfg, ns, secrets.token_urlsafe(32), refs))
        changed.append("Secret/" + common.CATALOG_SECRET)
    elif not cfg.catalog_uri and adopt_secret(ns, common.CATALOG_SECRET, refs):
        changed.append(f"Secret/{common.CATALOG_SECRET} owners")
    if not cfg.encryption_key_secret and kube.get("Secret", ns, sb.ENCRYPTION_SECRET) is None:
        key = base64.b64encode(secrets.token_bytes(32)).decode()
        kube.apply(sb.encryption_secret(cfg, ns, f"k1:{key}\n", refs))
        changed.append("Secret/" + sb.ENCRYPTION_SECRET)
    elif not cfg.encryption_key_secret and adopt_secret(ns, sb.ENCRYPTION_SECRET, refs):
        changed.append(f"Secret/{sb.ENCRYPTION_SECRET} owners")
    changed += tls.ensure(cfg, ns, refs)
    catalog_tls = ""
    if cfg.server_tls and not cfg.catalog_uri:
        secret = backend_tls.secret_name(common.CATALOG_NAME)
        changed += tls.ensure_backend(cfg, ns, secret, "catalog", sb.catalog_tls_names(ns), refs)
        if adopt_secret(ns, secret, refs):
            changed.append(f"Secret/{secret} owners")
        catalog_tls = backend_tls.digest(kube.get("Secret", ns, secret))
    monitoring = cfg.service_monitor and kube.group_served("monitoring.coreos.com/v1")
    for obj in desired(cfg, ns, refs, monitoring, catalog_tls):
        _, what = kube.apply(obj)
        if what != "unchanged":
            changed.append(f"{obj['kind']}/{obj['metadata']['name']} {what}")
    return ", ".join(changed) or "unchanged"


def adopt_secret(ns: str, name: str, refs: list[dict[str, Any]]) -> bool:
    """adopt_secret adds every live Pool to a generated Secret's owners. The Secret is
    created once, owned by the Pools alive then; without this, deleting those Pools let
    the garbage collector take the server's credentials from under the Pools still
    there (the next Pool's deletion then failed with 403 forever). Returns whether it
    changed anything."""
    live = kube.get("Secret", ns, name)
    if live is None:
        return False
    have = live["metadata"].get("ownerReferences") or []
    merged = kube.merge_owners(have, refs)
    if merged == have:
        return False
    kube.patch("Secret", ns, name, {"metadata": {"ownerReferences": merged}})
    return True


def api(cfg: Config, ns: str) -> ServerAPI:
    """api is a client for the namespace's server, with its admin token."""
    verify = tls.ca_file(ns) if cfg.server_tls else True
    return ServerAPI(cfg.server_url(ns), admin_token(ns) or "", timeout=10.0, verify=verify)


def backend_ca_file(ns: str) -> str | None:
    """backend_ca_file is what the operator verifies the namespace's TLS backends
    with: its copy of the CA in the server's Secret (None: the system roots)."""
    ca = tls.ca_file(ns)
    return ca if isinstance(ca, str) else None
