"""Builders are pure: same input, same dicts; checked field by field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice_operator.builders import builtin, common, server, thirdparty
from sluice_operator.config import Config, ConfigError

from .conftest import make_pool


def test_required_metal_placement_is_hard_node_affinity(cfg: Config) -> None:
    aff = common.affinity(cfg, {"nodeClass": "metal", "policy": "required"})
    terms = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "sluice.dev/node-class", "operator": "In", "values": ["metal"]}]}]


def test_preferred_virtual_placement_is_soft(cfg: Config) -> None:
    aff = common.affinity(cfg, {"nodeClass": "virtual", "policy": "preferred"})
    (pref,) = aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pref["preference"]["matchExpressions"][0]["values"] == ["virtual"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in aff["nodeAffinity"]


def test_any_placement_has_no_node_affinity_and_label_key_is_configurable() -> None:
    cfg = Config(metal_label_key="example.com/class")
    assert "nodeAffinity" not in common.affinity(cfg, {"nodeClass": "any", "policy": "required"})
    aff = common.affinity(cfg, {"nodeClass": "metal", "policy": "required"})
    expr = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert expr["matchExpressions"][0]["key"] == "example.com/class"


def test_placement_extras_are_copied_and_spread_gets_selector(cfg: Config) -> None:
    placement = {
        "nodeClass": "any",
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    }
    lbls = common.shard_labels(cfg, "web", 0)
    out = common.placement_pod_fields(cfg, placement, lbls)
    assert out["nodeSelector"] == {"disk": "ssd"}
    assert out["tolerations"] == placement["tolerations"]
    assert out["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]["sluice.dev/shard"] == "0"
    assert "labelSelector" not in placement["topologySpreadConstraints"][0]  # input untouched


def test_builtin_redis_statefulset(cfg: Config, pool: dict[str, Any]) -> None:
    sts = builtin.statefulset(cfg, pool, 1)
    assert sts["metadata"]["name"] == "web-1" and sts["metadata"]["namespace"] == "shop"
    assert sts["spec"]["serviceName"] == "web-1-headless"
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "sluice.dev/redis:dev" and c["imagePullPolicy"] == "IfNotPresent"
    assert "--appendonly yes" in c["command"][-1]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    sel = sts["spec"]["selector"]["matchLabels"]
    assert sel == {k: v for k, v in sts["spec"]["template"]["metadata"]["labels"].items() if k in sel}
    assert sel["sluice.dev/pool"] == "web" and sel["sluice.dev/shard"] == "1"


def test_builtin_redis_replicas_follow_pod_zero(cfg: Config) -> None:
    sts = builtin.statefulset(cfg, make_pool(replicas=3), 0)
    assert sts["spec"]["replicas"] == 3
    script = sts["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "--replicaof web-0-0.web-0-headless.shop.svc 6379" in script


def test_builtin_ephemeral_storage_uses_emptydir(cfg: Config) -> None:
    sts = builtin.statefulset(cfg, make_pool(storage={"size": "1Gi", "ephemeral": True}), 0)
    assert "volumeClaimTemplates" not in sts["spec"]
    assert {"name": "data", "emptyDir": {}} in sts["spec"]["template"]["spec"]["volumes"]


def test_builtin_mongo_uses_named_image_and_replset(cfg: Config) -> None:
    p = make_pool(backend="mongodb", image="example/mongo:7", replicas=3)
    c = builtin.statefulset(cfg, p, 0)["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "example/mongo:7" and c["command"][-2:] == ["--replSet", "web-0"]
    uri = builtin.shard_uri("mongodb", "web-0", "shop", 3)
    assert uri.endswith("/?replicaSet=web-0") and uri.count("web-0-headless") == 3


def test_builtin_client_service_targets_pod_zero(cfg: Config, pool: dict[str, Any]) -> None:
    headless, client = builtin.services(cfg, pool, 0)
    assert headless["spec"]["clusterIP"] == "None"
    assert client["metadata"]["name"] == "web-0"
    assert client["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "web-0-0"
    assert builtin.shard_uri("redis", "web-0", "shop", 1) == "redis://web-0.shop.svc:6379/0"


def test_redis_operator_single_instance_is_a_redis(cfg: Config, pool: dict[str, Any]) -> None:
    (obj,) = thirdparty.redis_objects(cfg, pool, 0)
    assert obj["apiVersion"] == "redis.redis.opstreelabs.in/v1beta2" and obj["kind"] == "Redis"
    assert obj["spec"]["kubernetesConfig"]["image"] == cfg.redis_operator_image
    assert obj["spec"]["storage"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert obj["spec"]["affinity"]["nodeAffinity"]
    assert thirdparty.redis_uri("web-0", "shop", 1) == "redis://web-0.shop.svc:6379/0"


def test_redis_operator_replicas_get_replication_and_sentinel(cfg: Config) -> None:
    repl, sentinel = thirdparty.redis_objects(cfg, make_pool(replicas=3), 1)
    assert repl["kind"] == "RedisReplication" and repl["spec"]["clusterSize"] == 3
    assert sentinel["kind"] == "RedisSentinel"
    assert sentinel["spec"]["kubernetesConfig"]["image"] == cfg.redis_sentinel_image
    assert sentinel["spec"]["redisSentinelConfig"]["redisReplicationName"] == "web-1"
    assert thirdparty.redis_uri("web-1", "shop", 3) == "redis://web-1-sentinel.shop.svc:26379?master=mymaster"


def test_mongodb_community_replica_set(cfg: Config) -> None:
    p = make_pool(backend="mongodb", replicas=3, version="7.0.14")
    obj = thirdparty.mongodb_community(cfg, p, 0)
    assert obj["apiVersion"] == "mongodbcommunity.mongodb.com/v1" and obj["kind"] == "MongoDBCommunity"
    spec = obj["spec"]
    assert spec["members"] == 3 and spec["type"] == "ReplicaSet" and spec["version"] == "7.0.14"
    (user,) = spec["users"]
    assert user["passwordSecretRef"] == {"name": "web-0-password", "key": "password"}
    assert user["connectionStringSecretName"] == thirdparty.mongo_connection_secret_name("web-0")
    secret = thirdparty.mongo_password_secret(cfg, p, 0, "s3cret")
    assert secret["metadata"]["name"] == "web-0-password" and secret["stringData"] == {"password": "s3cret"}


def test_server_objects_share_all_pool_owners(cfg: Config) -> None:
    owners = [
        common.owner_ref(make_pool(), controller=False),
        {**common.owner_ref(make_pool(), controller=False), "name": "b", "uid": "uid-b"},
    ]
    dep = server.deployment(cfg, "shop", owners)
    assert dep["metadata"]["ownerReferences"] == owners
    assert all(o["controller"] is False for o in owners)
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SLUICE_CATALOG"]["value"] == "redis://:$(CATALOG_PASSWORD)@sluice-catalog.shop.svc:6379/0"
    assert env["SLUICE_STORE"]["value"] == "redis://:$(CATALOG_PASSWORD)@sluice-catalog.shop.svc:6379/1"
    assert env["SLUICE_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "sluice-server-admin"
    assert dep["spec"]["replicas"] == cfg.server_replicas
    # Liveness waits out the server's start-up retries (SLUICE_START_TIMEOUT, 2 min).
    startup = dep["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > 120
    svc = server.service(cfg, "shop", owners)
    assert svc["spec"]["ports"][0]["port"] == 8888
    assert server.pdb(cfg, "shop", owners)["spec"]["maxUnavailable"] == 1
    mon = server.service_monitor(cfg, "shop", owners)
    assert mon["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]


def test_external_catalog_skips_catalog_redis(cfg: Config) -> None:
    ext = Config(catalog_uri="redis://catalog.infra.svc:6379/{namespace}", server_store="memory")
    env = {
        e["name"]: e.get("value")
        for e in server.deployment(ext, "shop", [])["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["SLUICE_CATALOG"] == "redis://catalog.infra.svc:6379/shop"
    assert env["SLUICE_STORE"] == "memory"


def test_builders_are_deterministic_and_json_clean(cfg: Config, pool: dict[str, Any]) -> None:
    a = json.dumps(builtin.statefulset(cfg, pool, 0), sort_keys=True)
    b = json.dumps(builtin.statefulset(cfg, pool, 0), sort_keys=True)
    assert a == b


def test_common_labels_and_pull_secrets_reach_pods() -> None:
    cfg = Config(common_labels={"team": "mq"}, image_pull_secrets=("regcred",))
    sts = builtin.statefulset(cfg, make_pool(), 0)
    assert sts["metadata"]["labels"]["team"] == "mq"
    assert "team" not in sts["spec"]["selector"]["matchLabels"]
    assert sts["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


@pytest.mark.parametrize(
    "given, passed",
    [
        ({}, {}),  # the server's own defaults
        (
            {"SLUICE_OPERATOR_MIGRATE_BATCH": "100", "SLUICE_OPERATOR_MIGRATE_RATE": "0"},
            {"SLUICE_MIGRATE_BATCH": "100", "SLUICE_MIGRATE_RATE": "0"},
        ),  # 0: no cap, not "unset"
        (
            {"SLUICE_OPERATOR_MIGRATE_RATE": "2000", "SLUICE_OPERATOR_MIGRATE_BATCH": ""},
            {"SLUICE_MIGRATE_RATE": "2000"},
        ),
    ],
)
def test_migration_pace_reaches_the_server_deployment(given: dict[str, str], passed: dict[str, str]) -> None:
    c = server.deployment(Config.from_env(given), "shop", [])["spec"]["template"]["spec"]["containers"][0]
    got = {e["name"]: e["value"] for e in c["env"] if e["name"].startswith("SLUICE_MIGRATE_")}
    assert got == passed


def test_notification_settings_reach_the_server_deployment() -> None:
    def env(cfg: Config) -> dict[str, Any]:
        c = server.deployment(cfg, "shop", [])["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}

    plain = env(Config())
    assert "SLUICE_SMTP_URL" not in plain and "SLUICE_REQUIRE_CONFIRMATION" not in plain
    on = env(
        Config.from_env({"SLUICE_OPERATOR_SMTP_URL": "smtp://relay:25", "SLUICE_OPERATOR_REQUIRE_CONFIRMATION": "true"})
    )
    assert on["SLUICE_SMTP_URL"] == "smtp://relay:25" and on["SLUICE_REQUIRE_CONFIRMATION"] == "true"
    # A relay URL with a password stays in a Secret: the Deployment only references it.
    ref = env(
        Config.from_env(
            {"SLUICE_OPERATOR_SMTP_URL_SECRET": "smtp-relay/url", "SLUICE_OPERATOR_SIGNED_URL_SECRET": "share/key"}
        )
    )
    assert ref["SLUICE_SMTP_URL"] == {"secretKeyRef": {"name": "smtp-relay", "key": "url", "optional": True}}
    assert ref["SLUICE_SIGNED_URL_SECRET"] == {"secretKeyRef": {"name": "share", "key": "key", "optional": True}}
    assert "SLUICE_SIGNED_URL_SECRET" not in plain


@pytest.mark.parametrize(
    "given, passed",
    [
        ({}, None),  # no CPU named: Go's own choice
        (
            {"SLUICE_OPERATOR_SERVER_RESOURCES": '{"requests": {"cpu": "100m"}}'},
            {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1"}},
        ),  # the CPUs requested, rounded up by the kubelet: 1
        (
            {"SLUICE_OPERATOR_SERVER_RESOURCES": '{"limits": {"cpu": "3"}}'},
            {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1"}},
        ),  # a limit alone is the request too (API defaulting)
        (
            {
                "SLUICE_OPERATOR_SERVER_RESOURCES": '{"requests": {"cpu": "2"}}',
                "SLUICE_OPERATOR_SERVER_GOMAXPROCS": "0",
            },
            None,
        ),  # 0: left to Go
        ({"SLUICE_OPERATOR_SERVER_GOMAXPROCS": "4"}, "4"),
    ],
)
def test_server_gomaxprocs_follows_its_cpu_request(given: dict[str, str], passed: Any) -> None:
    c = server.deployment(Config.from_env(given), "shop", [])["spec"]["template"]["spec"]["containers"][0]
    got = [e.get("value", e.get("valueFrom")) for e in c["env"] if e["name"] == "GOMAXPROCS"]
    assert got == ([] if passed is None else [passed])


@pytest.mark.parametrize("bad", ["-1", "1025", "two", "1.5"])
def test_server_gomaxprocs_out_of_range_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="SERVER_GOMAXPROCS"):
        Config.from_env({"SLUICE_OPERATOR_SERVER_GOMAXPROCS": bad})
