"""The Pool reconcile's decisions without a cluster: the conditions it writes from what
the steps found, the shard URI from the Secrets' values, and reading a namespace's
deletion without swallowing failures."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from sluice_operator import kube
from sluice_operator.handlers import pool, provisioning
from sluice_operator.serverapi import ServerError, Unavailable

from .conftest import make_pool


def test_provisioned_and_registered_conditions() -> None:
    assert pool.provisioned(2, "external", "") == (True, "Provisioned", "2 shards by external")
    assert pool.provisioned(2, "external", "Secret lists 1 URIs for 2 shards")[:2] == (False, "NotProvisionable")
    both = [{"registered": True}, {"registered": True}]
    assert pool.registered(both, 2, "web") == (True, "Registered", "2 shard(s) registered in flavor web")
    one = [{"registered": True}, {"registered": False}]
    assert pool.registered(one, 2, "web") == (False, "ShardsNotReady", "1 shard(s) registered in flavor web")
    # A leaving shard still registered does not make the wanted ones registered.
    assert pool.registered([{"registered": False}, {"registered": True}], 1, "web")[0] is False
    assert pool.registered([], 0, "web")[0] is False


def test_registration_failure_says_whether_the_server_refused() -> None:
    refused = ServerError(409, "Conflict", "pool web-0 already uses redis://r:6379/0: a pool is a storage of its own")
    assert pool.registration_failure(refused) == (
        "ServerRefused",
        "Conflict: pool web-0 already uses redis://r:6379/0: a pool is a storage of its own",
    )
    assert pool.registration_failure(Unavailable("connection refused")) == ("ServerUnavailable", "connection refused")


def test_scaled_down_condition() -> None:
    blocked = pool.scaled_down(["web-2 holds 1 queue(s) (q)"], True, True, False, 2)
    assert blocked is not None and blocked[:2] == (False, "ShardsHoldQueues") and "web-2 holds" in blocked[2]
    assert pool.scaled_down([], False, True, False, 2) == (True, "Done", "2 shard(s) remain")
    # Once reported, the condition stays and says Done after the scale-down.
    assert pool.scaled_down([], False, False, True, 3) == (True, "Done", "3 shard(s) remain")
    assert pool.scaled_down([], False, False, False, 3) is None


def test_readiness_over_generated_shard_states() -> None:
    rng = random.Random(17)
    for _ in range(500):
        wanted = rng.randint(0, 4)
        entries = [
            {"ready": rng.random() < 0.7, "registered": rng.random() < 0.7} for _ in range(wanted + rng.randint(0, 2))
        ]
        prov_error = rng.choice(["", "", "Secret lists 1 URIs for 2 shards"])
        r = pool.Readiness.of(entries, wanted, prov_error)
        mine = entries[:wanted]
        assert r.ready == sum(e["ready"] for e in mine) and r.registered == sum(e["registered"] for e in mine)
        assert r.broken == sum(e["registered"] and not e["ready"] for e in mine)
        assert r.is_ready == (all(e["ready"] and e["registered"] for e in mine) and not prov_error)
        assert r.message() == f"{r.ready}/{wanted} shards answer, {r.registered}/{wanted} registered"


def test_uri_of_decides_from_secret_values() -> None:
    body = make_pool(backend="redis", replicas=1)
    assert provisioning.uri_of(body, "external", 1, ["redis://a/0", "redis://b/0"]) == "redis://b/0"
    assert provisioning.uri_of(body, "external", 2, ["redis://a/0"]) is None
    assert provisioning.uri_of(body, "builtin", 0, None, password="pw") == provisioning.builtin.shard_uri(
        "redis", "web-0", "shop", 1, "pw"
    )
    mongo = make_pool(backend="mongodb", replicas=3)
    assert provisioning.uri_of(mongo, "mongodb-community", 0, None) is None  # replica set not up yet
    conn = "mongodb://u:p@web-0-0.web-0-svc.shop.svc:27017,web-0-1.web-0-svc.shop.svc:27017/admin?replicaSet=web-0"
    assert provisioning.uri_of(mongo, "mongodb-community", 0, None, connection=conn) == (
        provisioning.thirdparty.mongo_data_uri(conn)
    )
    # One URI per line: a comma belongs to the URI (a MongoDB seed list).
    assert provisioning.parse_uris("# shards\nmongodb://a:1,b:2/db\n\n redis://c/0 \n") == [
        "mongodb://a:1,b:2/db",
        "redis://c/0",
    ]


def test_namespace_terminating_reads_deletion_and_raises_other_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[Any] = []

    def call(method: str, url: str, **_: Any) -> Any:
        assert (method, url) == ("GET", "/api/v1/namespaces/shop")
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    monkeypatch.setattr(kube, "_call", call)
    answers += [{"metadata": {"deletionTimestamp": "2026-11-23T00:00:00Z"}}, {"metadata": {}}, ApiException(status=404)]
    assert [kube.namespace_terminating("shop") for _ in range(3)] == [True, False, True]
    answers.append(ApiException(status=500))
    with pytest.raises(ApiException):
        kube.namespace_terminating("shop")
    answers.append(ConnectionError("apiserver unreachable"))
    with pytest.raises(ConnectionError):
        kube.namespace_terminating("shop")
