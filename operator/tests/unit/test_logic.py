"""Decision logic without a cluster: provisioner choice, scheduling verdicts,
scale-down planning, queue metadata, conditions, configuration."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator import conditions as cond
from sluice_operator.config import Config, ConfigError
from sluice_operator.handlers import provisioning, queue, scheduling, shards
from sluice_operator.handlers.pool import phase_of
from sluice_operator.probes import endpoint, redact
from sluice_operator.serverapi import queue_count_from

choose = provisioning.choose_provisioner


@pytest.mark.parametrize(
    "backend,requested,default,redis_op,mongo_op,image,want",
    [
        ("redis", "auto", "auto", True, False, False, "redis-operator"),
        ("redis", "auto", "auto", False, True, False, "builtin"),
        ("mongodb", "auto", "auto", False, True, False, "mongodb-community"),
        ("mongodb", "auto", "auto", False, False, True, "builtin"),
        ("redis", "auto", "builtin", True, True, False, "builtin"),
        ("redis", "builtin", "redis-operator", True, False, False, "builtin"),
        ("redis", "external", "auto", False, False, False, "external"),
    ],
)
def test_choose_provisioner(
    backend: str, requested: str, default: str, redis_op: bool, mongo_op: bool, image: bool, want: str
) -> None:
    got, why = choose(backend, requested, default, redis_op, mongo_op, image)
    assert got == want and why


def test_auto_says_why() -> None:
    _, why = choose("redis", "auto", "auto", False, False, False)
    assert "redis-operator CRDs are not installed" in why


@pytest.mark.parametrize(
    "args,needle",
    [
        (("mongodb", "auto", "auto", False, False, False), "needs spec.image"),
        (("redis", "redis-operator", "auto", False, False, False), "CRDs are not installed"),
        (("mongodb", "mongodb-community", "auto", False, False, False), "CRDs are not installed"),
        (("redis", "mongodb-community", "auto", False, True, False), "cannot run a redis Pool"),
        (("mongodb", "auto", "redis-operator", True, False, True), "cannot run a mongodb Pool"),
    ],
)
def test_choose_provisioner_refusals(args: tuple[Any, ...], needle: str) -> None:
    with pytest.raises(provisioning.NotProvisionable, match=needle):
        choose(*args)


def pod(name: str, node: str | None = None, unschedulable: str | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {"metadata": {"name": name}, "spec": {}, "status": {}}
    if node:
        p["spec"]["nodeName"] = node
    if unschedulable:
        p["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        ]
    return p


METAL_REQUIRED = {"nodeClass": "metal", "policy": "required"}


def test_no_metal_nodes_is_named() -> None:
    pods = [pod("web-0-0", unschedulable="0/3 nodes are available: 3 node(s) didn't match node affinity")]
    ok, reason, msg = scheduling.schedulable(pods, METAL_REQUIRED, "sluice.dev/node-class", 0)
    assert ok is False and reason == "NoMatchingNodes"
    assert "no node carries sluice.dev/node-class=metal" in msg and "didn't match" in msg


def test_unschedulable_reports_scheduler_message() -> None:
    pods = [
        pod("web-0-0", node="m1"),
        pod("web-1-0", unschedulable="Insufficient memory"),
        pod("web-1-1", unschedulable="x"),
    ]
    ok, reason, msg = scheduling.schedulable(pods, METAL_REQUIRED, "k", 2)
    assert (ok, reason) == (False, "Unschedulable")
    assert msg == "web-1-0 (and 1 more): Insufficient memory"


def test_all_bound_is_schedulable_and_pending_is_unknown() -> None:
    assert scheduling.schedulable([pod("a-0", node="n")], METAL_REQUIRED, "k", 1)[:2] == (True, "Scheduled")
    assert scheduling.schedulable([pod("a-0")], METAL_REQUIRED, "k", 1)[0] is None
    assert scheduling.schedulable([], {"nodeClass": "any"}, "k", None)[:2] == (None, "NoPods")
    # preferred placement never blames missing metal nodes
    assert scheduling.schedulable([pod("a-0", node="v")], {"nodeClass": "metal"}, "k", 0)[0] is True


def test_shard_pods_match_statefulset_pods_only() -> None:
    pods = [pod(n) for n in ("web-0-0", "web-0-sentinel-1", "web-10-0", "web-0-0-x", "other-0")]
    got = [p["metadata"]["name"] for p in scheduling.shard_pods(pods, ["web-0"])]
    assert got == ["web-0-0", "web-0-sentinel-1"]


def test_plan_and_known_indices() -> None:
    sts = [{"metadata": {"labels": {"sluice.dev/pool": "web", "sluice.dev/shard": "3"}}}]
    known = shards.known_indices("web", [{"index": 0}, {"index": 1}, {"index": 2}], sts)
    assert known == {0, 1, 2, 3}
    assert shards.plan(2, known) == ([0, 1], [2, 3])
    assert shards.plan(5, known) == ([0, 1, 2, 3, 4], [])


def q(name: str, pool: str, shard: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"pool": pool}, "status": {"shard": shard} if shard else {}}


def test_queues_on_shard_uses_resources_and_server_detail() -> None:
    crs = [q("a", "web", "web-2"), q("b", "web", "web-1"), q("c", "web", "web-2"), q("d", "other", "web-2")]
    assert shards.queues_on_shard(None, crs, "web", "web-2") == (2, ["a", "c"])
    assert shards.queues_on_shard({"queues": 5}, crs, "web", "web-2") == (5, ["a", "c"])
    assert shards.queues_on_shard({"queues": ["x", "a"]}, crs, "web", "web-2") == (3, ["a", "c", "x"])


def test_queue_count_from_conflict_description() -> None:
    assert queue_count_from("Pool web-2 still holds 3 queues") == 3
    assert queue_count_from("busy") is None


def test_queue_metadata_and_changes() -> None:
    spec = {
        "pool": "web",
        "messageTTL": 120,
        "delay": 5,
        "maxPostSize": 1000,
        "deadLetter": {"queue": "dlq", "maxClaimCount": 3, "messageTTL": 600},
    }
    md = queue.queue_metadata(spec)
    assert md == {
        "_flavor": "web",
        "_default_message_ttl": 120,
        "_default_message_delay": 5,
        "_max_messages_post_size": 1000,
        "_dead_letter_queue": "dlq",
        "_max_claim_count": 3,
        "_dead_letter_queue_messages_ttl": 600,
    }
    have = dict(md, _default_message_ttl=3600, _flavor="elsewhere")
    assert queue.metadata_changes(md, have) == {"_default_message_ttl": 120}


def test_queue_identity_defaults() -> None:
    body = {"metadata": {"name": "orders", "namespace": "shop"}, "spec": {"pool": "web"}}
    assert queue.identity(body) == ("shop", "orders")
    body["spec"].update(name="orders-v2", project="tenant-a")
    assert queue.identity(body) == ("tenant-a", "orders-v2")


def test_conditions_keep_transition_time_until_status_changes() -> None:
    c = cond.set_condition(None, "Ready", False, "NotReady", "0/2", 1, at="t1")
    c = cond.set_condition(c, "Ready", False, "NotReady", "1/2", 2, at="t2")
    assert c[0]["lastTransitionTime"] == "t1" and c[0]["observedGeneration"] == 2 and c[0]["message"] == "1/2"
    c = cond.set_condition(c, "Ready", True, "Ready", "2/2", 2, at="t3")
    assert c[0]["lastTransitionTime"] == "t3" and cond.is_true(c, "Ready")
    c = cond.set_condition(c, "Schedulable", None, "NoPods", "", 2, at="t4")
    assert [x["type"] for x in c] == ["Ready", "Schedulable"] and c[1]["status"] == "Unknown"


def test_phase_of() -> None:
    assert phase_of(2, 2, 2, 0, False) == "Ready"
    assert phase_of(2, 1, 1, 0, False) == "Provisioning"  # the second shard is still coming up
    assert phase_of(2, 1, 2, 0, False, broken=1) == "Degraded"  # a registered shard stopped answering
    assert phase_of(2, 0, 0, 0, False) == "Provisioning"
    assert phase_of(2, 2, 2, 1, False) == "Draining"
    assert phase_of(2, 2, 2, 0, True) == "Failed"


def test_parse_uris_and_redaction() -> None:
    text = "# shards\nredis://a:6379/0\n\nredis://b:6379/0\n"
    assert provisioning.parse_uris(text) == ["redis://a:6379/0", "redis://b:6379/0"]
    assert redact("mongodb://u:p@h1:27017,h2:27017/admin") == "mongodb://h1:27017,h2:27017/admin"
    assert endpoint("redis://:pw@h:6379/0") == "h:6379"


def test_config_from_env() -> None:
    cfg = Config.from_env(
        {
            "SLUICE_OPERATOR_METAL_LABEL_KEY": "example.com/class",
            "SLUICE_OPERATOR_SERVER_REPLICAS": "3",
            "SLUICE_OPERATOR_DEFAULT_PROVISIONER": "builtin",
            "SLUICE_OPERATOR_SERVER_RESOURCES": '{"requests": {"cpu": "100m"}}',
            "SLUICE_OPERATOR_WATCH_NAMESPACES": "a, b",
            "SLUICE_OPERATOR_SERVER_URL_TEMPLATE": "http://127.0.0.1:1234",
        }
    )
    assert cfg.metal_label_key == "example.com/class" and cfg.server_replicas == 3
    assert cfg.default_provisioner == "builtin" and cfg.watch_namespaces == ("a", "b")
    assert cfg.server_resources == {"requests": {"cpu": "100m"}}
    assert cfg.server_url("x") == "http://127.0.0.1:1234"
    assert Config().server_url("shop") == "http://sluice-server.shop.svc:8888"


@pytest.mark.parametrize(
    "env,needle",
    [
        ({"SLUICE_OPERATOR_SERVER_REPLICAS": "zero"}, "not an integer"),
        ({"SLUICE_OPERATOR_SERVER_REPLICAS": "0"}, "outside 1..100"),
        ({"SLUICE_OPERATOR_DEFAULT_PROVISIONER": "helm"}, "is not one of"),
        ({"SLUICE_OPERATOR_SERVER_PLACEMENT": '{"nodeClass": "gpu"}'}, "nodeClass"),
        ({"SLUICE_OPERATOR_SERVER_RESOURCES": "{"}, "not valid JSON"),
        ({"SLUICE_OPERATOR_IMAGE_PULL_POLICY": "Sometimes"}, "IMAGE_PULL_POLICY"),
        ({"SLUICE_OPERATOR_REQUIRE_CONFIRMATION": "maybe"}, "REQUIRE_CONFIRMATION='maybe' is not a boolean"),
        ({"SLUICE_OPERATOR_SERVICE_MONITOR": "perhaps"}, "SERVICE_MONITOR='perhaps' is not a boolean"),
        ({"SLUICE_OPERATOR_SMTP_URL_SECRET": "just-a-name"}, "is not secret-name/key"),
        ({"SLUICE_OPERATOR_SIGNED_URL_SECRET": "a/b/c"}, "SIGNED_URL_SECRET='a/b/c' is not secret-name/key"),
        ({"SLUICE_OPERATOR_MIGRATE_BATCH": "0"}, "MIGRATE_BATCH=0 is outside 1..10000"),
        ({"SLUICE_OPERATOR_MIGRATE_BATCH": "lots"}, "MIGRATE_BATCH='lots' is not an integer"),
        ({"SLUICE_OPERATOR_MIGRATE_RATE": "-1"}, "MIGRATE_RATE=-1 is outside 0..10000000"),
    ],
)
def test_config_errors_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Config.from_env(env)


class FakePatch:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {}


def test_write_status_writes_only_changes() -> None:
    p = FakePatch()
    old = {"phase": "Ready", "queues": 2}
    assert cond.write_status(p, old, {"phase": "Ready", "queues": 2}, touch="lastSynced") is False
    assert p.status == {}
    assert cond.write_status(p, old, {"phase": "Ready", "queues": 3}, touch="lastSynced") is True
    assert p.status["queues"] == 3 and "lastSynced" in p.status and "phase" not in p.status
