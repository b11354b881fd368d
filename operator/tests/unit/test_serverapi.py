"""The server client and the shard registration / scale-down logic, against an
HTTP double of the Zaqar v2 admin API (the real server is exercised by the
integration and end-to-end suites)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice_operator.handlers import shards
from sluice_operator.serverapi import CLIENT_ID, ServerAPI, ServerError, Unavailable

from .zaqar_double import ZaqarDouble


@pytest.fixture
def server() -> Iterator[ZaqarDouble]:
    d = ZaqarDouble()
    yield d
    d.stop()


@pytest.fixture
def api(server: ZaqarDouble) -> ServerAPI:
    return ServerAPI(server.url, token=server.state.token, timeout=5)


def entries(n: int, ready: bool = True) -> list[dict]:
    return [{"index": i, "name": f"web-{i}", "ready": ready, "registered": False} for i in range(n)]


def test_register_puts_pools_and_flavor(server: ZaqarDouble, api: ServerAPI) -> None:
    es = entries(2)
    uris = {"web-0": "redis://web-0.shop.svc:6379/0", "web-1": "redis://web-1.shop.svc:6379/0"}
    shards.register(api, "web", es, uris, 100)
    assert all(e["registered"] for e in es)
    assert server.state.pools["web-0"] == {"uri": uris["web-0"], "weight": 100, "flavor": "web"}
    assert server.state.flavors[("sluice-admin", "web")] == ["web-0", "web-1"]
    method, path, headers, _body = server.state.requests[0]
    assert (method, path) == ("GET", "/v2/pools/web-0?detailed=true")
    assert headers["Client-ID"] == CLIENT_ID and headers["Authorization"] == "Bearer admintoken"
    # Second run changes nothing but the flavor refresh: no PUT/PATCH of pools.
    before = len(server.state.requests)
    shards.register(api, "web", entries(2), uris, 100)
    writes = [r for r in server.state.requests[before:] if r[0] in ("PUT", "PATCH") and "/pools/" in r[1]]
    assert writes == []


def test_closing_the_client_closes_its_connections(server: ZaqarDouble) -> None:
    # A stopping server waits for its clients' keep-alive connections (linger), so
    # the operator closes each client when a step is done.
    with ServerAPI(server.url, token=server.state.token, timeout=5) as api:
        api.delete_flavor("web")
        api.delete_flavor("web")
        assert server.state.open_connections == 1  # one kept-alive connection, reused
    assert server.connections_closed()


def test_register_skips_unready_shards_and_patches_weight(server: ZaqarDouble, api: ServerAPI) -> None:
    es = entries(2)
    es[1]["ready"] = False
    uris = {"web-0": "redis://a:6379/0", "web-1": "redis://b:6379/0"}
    shards.register(api, "web", es, uris, 100)
    assert "web-1" not in server.state.pools and es[1]["registered"] is False
    shards.register(api, "web", entries(1), uris, 40)
    assert server.state.pools["web-0"]["weight"] == 40
    assert any(
        r[0] == "PATCH" and r[3] == {"uri": "redis://a:6379/0", "weight": 40, "flavor": "web"}
        for r in server.state.requests
    )


def test_queue_lifecycle(server: ZaqarDouble, api: ServerAPI) -> None:
    shards.register(api, "web", entries(1), {"web-0": "redis://a:6379/0"}, 100)
    api.put_flavor("web", ["web-0"], project="shop")
    assert api.put_queue("shop", "orders", {"_flavor": "web", "_default_message_ttl": 120}) is True
    assert api.put_queue("shop", "orders", {"_flavor": "web"}) is False
    have = api.get_queue("shop", "orders")
    api.patch_queue("shop", "orders", {"_default_message_ttl": 300, "_max_claim_count": 5}, have)
    _, _, headers, ops = server.state.requests[-1]
    assert headers["Content-Type"] == "application/openstack-messaging-v2.0-json-patch"
    assert ops == [
        {"op": "replace", "path": "/metadata/_default_message_ttl", "value": 300},
        {"op": "add", "path": "/metadata/_max_claim_count", "value": 5},
    ]
    assert api.queue_stats("shop", "orders") == ({"free": 2, "claimed": 1, "total": 3}, 7.0)
    api.delete_queue("shop", "orders")
    assert ("shop", "orders") not in server.state.queues


def test_unknown_flavor_is_a_server_error_with_zaqar_text(api: ServerAPI) -> None:
    with pytest.raises(ServerError) as err:
        api.put_queue("shop", "q", {"_flavor": "nosuch"})
    assert err.value.status == 400 and err.value.description == "Flavor nosuch does not exist"


def test_drain_refuses_while_queues_remain_then_removes(server: ZaqarDouble, api: ServerAPI) -> None:
    uris = {"web-0": "redis://a:6379/0", "web-1": "redis://b:6379/0"}
    shards.register(api, "web", entries(2), uris, 100)
    api.put_flavor("web", ["web-1"], project="shop")
    api.put_queue("shop", "orders", {"_flavor": "web"})
    leaving = {"index": 1, "name": "web-1", "ready": True}
    removed, count, _names = shards.drain(api, "web", leaving, [])
    assert (removed, count) == (False, 1)
    assert server.state.pools["web-1"]["weight"] == 0 and leaving["draining"] is True
    api.delete_queue("shop", "orders")
    removed, count, _ = shards.drain(api, "web", leaving, [])
    assert (removed, count) == (True, 0) and "web-1" not in server.state.pools


def test_unreachable_server_is_unavailable() -> None:
    api = ServerAPI("http://127.0.0.1:9", token="x", timeout=1)
    with pytest.raises(Unavailable):
        api.get_pool("web-0")
