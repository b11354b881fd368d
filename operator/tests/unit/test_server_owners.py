"""The namespace's generated Secrets (the server's admin token, the catalog's
password) belong to every live Pool, like the server's other objects: deleting
the Pool that happened to create them must leave them to the Pools still
there, whose deletion needs the admin token to unregister their shards."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.builders import common
from sluice_operator.config import Config
from sluice_operator.handlers import pool as pool_handler
from sluice_operator.handlers import server as server_handler

from .kube_double import Patch, Store
from .test_reconcile import server, store  # noqa: F401  (fixtures)
from .zaqar_double import ZaqarDouble


def pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "generation": 1},
        "spec": {"backend": "redis", "provisioner": "external", "shards": 1},
        "status": {"provisioner": "external", "shards": []},
    }


def collect_garbage(s: Store) -> None:
    """Background garbage collection: references to owners that are gone are dropped,
    and an object left without any owner goes."""
    uids = {o["metadata"].get("uid") for o in s.objs.values()}
    for (kind, ns, name), obj in list(s.objs.items()):
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if r["uid"] in uids]
        if refs and not alive:
            s.delete(kind, ns, name)
        else:
            obj["metadata"]["ownerReferences"] = alive


def owner_uids(s: Store, name: str) -> list[str]:
    secret = s.get("Secret", "shop", name)
    assert secret is not None, f"Secret {name} is gone"
    return sorted(r["uid"] for r in secret["metadata"].get("ownerReferences") or [])


@pytest.mark.parametrize("first", ["a", "b"])
def test_generated_secrets_outlive_the_pool_that_made_them(
    store: Store,  # noqa: F811
    server: ZaqarDouble,  # noqa: F811
    first: str,
) -> None:
    cfg = Config(server_url_template=server.url)
    later = "b" if first == "a" else "a"
    store.apply(pool(first))
    server_handler.ensure(cfg, "shop", pool(first))
    # The server's own admin token, so the double accepts it.
    store.objs[("Secret", "shop", common.ADMIN_SECRET)]["data"]["token"] = "YWRtaW50b2tlbg=="
    assert owner_uids(store, common.ADMIN_SECRET) == [f"uid-{first}"]
    store.apply(pool(later))
    server_handler.ensure(cfg, "shop", pool(later))
    for secret in (common.ADMIN_SECRET, common.CATALOG_SECRET):
        assert owner_uids(store, secret) == ["uid-a", "uid-b"]
    # The first Pool goes; the second one's deletion still reaches the server as admin.
    server.state.flavors[("sluice-admin", later)] = []
    pool_handler.delete(cfg, pool(first), Patch(), retry=0)
    store.delete("Pool", "shop", first)
    collect_garbage(store)
    assert owner_uids(store, common.ADMIN_SECRET) == [f"uid-{later}"]
    pool_handler.delete(cfg, pool(later), Patch(), retry=0)
    assert ("sluice-admin", later) not in server.state.flavors
