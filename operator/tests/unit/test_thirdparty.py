"""What the pinned third-party operators (redis-operator v0.16.0, the MongoDB
community operator v0.9.0) do with the objects we build, checked on the
builders and handlers without a cluster: the shapes they cannot survive are
refused, our retention policy reaches their finalizers, their copying of
labels and annotations cannot break or roll a shard, a shard changing shape
waits for the old one, and their connection strings are rewritten."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from sluice_operator import kube, probes
from sluice_operator.builders import shard_settings, thirdparty
from sluice_operator.config import Config
from sluice_operator.handlers import provisioning

from .conftest import make_pool
from .kube_double import Store
from .test_reconcile import run_pool, server, store  # noqa: F401  (fixtures)
from .zaqar_double import ZaqarDouble

choose = provisioning.choose_provisioner


# R1, M3: every combination of backend, request and installed operators; an
# ephemeral Pool never lands on a third-party provisioner.
@pytest.mark.parametrize(
    "backend,requested,redis_op,mongo_op,image",
    list(
        itertools.product(
            ["redis", "mongodb"],
            ["auto", "redis-operator", "mongodb-community", "builtin"],
            [False, True],
            [False, True],
            [False, True],
        )
    ),
)
def test_ephemeral_never_reaches_third_party(
    backend: str, requested: str, redis_op: bool, mongo_op: bool, image: bool
) -> None:
    try:
        persistent, _ = choose(backend, requested, "auto", redis_op, mongo_op, image, ephemeral=False)
    except provisioning.NotProvisionable:
        persistent = None
    try:
        got, why = choose(backend, requested, "auto", redis_op, mongo_op, image, ephemeral=True)
    except provisioning.NotProvisionable as exc:
        # Refused only where the persistent Pool was refused too, or asked for a third party.
        assert persistent is None or requested in provisioning.EPHEMERAL_REFUSALS or requested == "auto"
        assert persistent is None or "ephemeral" in str(exc)
        return
    assert got not in provisioning.EPHEMERAL_REFUSALS
    if persistent in provisioning.EPHEMERAL_REFUSALS:
        assert requested == "auto" and "storage.ephemeral" in why


def test_auto_ephemeral_redis_says_why() -> None:
    got, why = choose("redis", "auto", "auto", True, False, False, ephemeral=True)
    assert got == "builtin" and "finalizer" in why


def test_ephemeral_switched_on_later_is_refused(cfg: Config) -> None:
    p = make_pool(provisioner="redis-operator", storage={"size": "1Gi", "ephemeral": True})
    with pytest.raises(provisioning.NotProvisionable, match="ephemeral"):
        provisioning.shard_objects(cfg, p, "redis-operator", 0)
    with pytest.raises(provisioning.NotProvisionable, match="ephemeral"):
        provisioning.shard_objects(
            cfg, make_pool(backend="mongodb", storage={"ephemeral": True}), "mongodb-community", 0
        )


@pytest.mark.parametrize("replicas", [1, 3])
def test_redis_claims_are_kept_after_delete(cfg: Config, replicas: int) -> None:
    """R2: the upstream finalizer deletes claims unless keepAfterDelete."""
    objs = thirdparty.redis_objects(cfg, make_pool(replicas=replicas, storage={"size": "3Gi"}), 0)
    data = [o for o in objs if o["kind"] in ("Redis", "RedisReplication")]
    assert len(data) == 1
    storage = data[0]["spec"]["storage"]
    assert storage["keepAfterDelete"] is True
    assert storage["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "3Gi"


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_redis_labels_do_not_follow_common_labels(replicas: int) -> None:
    """R4: upstream copies CR labels into immutable selectors."""
    a = thirdparty.redis_objects(Config(), make_pool(replicas=replicas), 0)
    b = thirdparty.redis_objects(
        Config(common_labels={"team": "payments", "env": "prod"}), make_pool(replicas=replicas), 0
    )
    for x, y in zip(a, b, strict=True):
        assert x["metadata"]["labels"] == y["metadata"]["labels"]
        assert "team" not in y["metadata"]["labels"]
        assert y["metadata"]["labels"]["sluice.dev/pool"] == "web"
        assert kube.object_hash(x) == kube.object_hash(y)


@pytest.mark.parametrize("replicas", [1, 3])
def test_our_annotations_stay_out_of_pod_templates(cfg: Config, replicas: int) -> None:
    """R7: every CR tells redis-operator to leave our annotations out of its pods."""
    for obj in thirdparty.redis_objects(cfg, make_pool(replicas=replicas), 0):
        ignored = obj["spec"]["kubernetesConfig"]["ignoreAnnotations"]
        assert kube.HASH_ANNOTATION in ignored and thirdparty.NUDGE_ANNOTATION in ignored


def redis_cr(kind: str, shard: str = "web-0") -> dict[str, Any]:
    return {
        "apiVersion": "redis.redis.opstreelabs.in/v1beta2",
        "kind": kind,
        "metadata": {"name": shard, "namespace": "shop"},
    }


def owned_by(kind: str, what: str = "StatefulSet", name: str = "web-0") -> dict[str, Any]:
    return {
        "kind": what,
        "metadata": {"name": name, "namespace": "shop", "ownerReferences": [{"kind": kind, "name": name}]},
    }


@pytest.mark.parametrize(
    "replicas,old,new",
    [(3, ["Redis"], ["RedisReplication", "RedisSentinel"]), (1, ["RedisReplication", "RedisSentinel"], ["Redis"])],
)
def test_shape_change_retires_the_old_kind_first(replicas: int, old: list[str], new: list[str]) -> None:
    """R3: replicas crossing 1 switches kind; both shapes name a StatefulSet after the shard."""
    s = Store()
    for k in old:
        s.apply(redis_cr(k))
    s.apply(owned_by(old[0]))
    s.apply(owned_by(old[0], "Service"))
    assert thirdparty.redis_kinds(replicas) == (new, old)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kube, "get", s.get)
        mp.setattr(kube, "delete", s.delete)
        msg = provisioning.retire_other_redis_shape("shop", "web-0", replicas)
        assert msg and "StatefulSet web-0" in msg and old[0] in msg
        assert all(s.get(k, "shop", "web-0") is None for k in old)
        # The garbage collector takes the StatefulSet, then the Service.
        s.delete("StatefulSet", "shop", "web-0")
        assert "Service web-0" in (provisioning.retire_other_redis_shape("shop", "web-0", replicas) or "")
        s.delete("Service", "shop", "web-0")
        s.apply(owned_by(old[0], "Service", "web-0-headless"))
        assert "Service web-0-headless" in (provisioning.retire_other_redis_shape("shop", "web-0", replicas) or "")
        s.delete("Service", "shop", "web-0-headless")
        assert provisioning.retire_other_redis_shape("shop", "web-0", replicas) is None
        # Objects of the current shape are never touched.
        for k in new:
            s.apply(redis_cr(k))
        s.apply(owned_by(new[0]))
        assert provisioning.retire_other_redis_shape("shop", "web-0", replicas) is None
        assert all(s.get(k, "shop", "web-0") for k in new)


def test_nudge_only_when_readiness_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """R7: an annotation change is the one event redis-operator reacts to at once."""
    s = Store()
    for k in ("RedisReplication", "RedisSentinel"):
        s.apply(redis_cr(k))
    monkeypatch.setattr(kube, "get", s.get)
    calls: list[str] = []

    def patch(kind: str, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        calls.append(kind)
        return s.patch(kind, ns, name, body)

    monkeypatch.setattr(kube, "patch", patch)
    sts = {"status": {"readyReplicas": 2}}
    assert provisioning.nudge_redis_operator("shop", "web-0", provisioning.nudge_value(sts)) == [
        "RedisReplication",
        "RedisSentinel",
    ]
    assert provisioning.nudge_redis_operator("shop", "web-0", provisioning.nudge_value(sts)) == []
    sts["status"]["readyReplicas"] = 3
    assert provisioning.nudge_redis_operator("shop", "web-0", provisioning.nudge_value(sts)) == [
        "RedisReplication",
        "RedisSentinel",
    ]
    assert calls == ["RedisReplication", "RedisSentinel"] * 2
    live = s.get("RedisReplication", "shop", "web-0")
    assert live and live["metadata"]["annotations"][thirdparty.NUDGE_ANNOTATION] == "ready=3"
    assert provisioning.nudge_value(None) == "ready=0"


@pytest.mark.parametrize(
    "raw",
    [
        "mongodb://sluice:pw@mg-0-0.mg-0-svc.ns.svc.cluster.local:27017,mg-0-1.mg-0-svc.ns.svc.cluster.local:27017/admin?replicaSet=mg-0&ssl=false",
        "mongodb://sluice:p%40ss@mg-0-0.mg-0-svc.ns.svc:27017/admin?ssl=false",
        "mongodb+srv://sluice:pw@mg-0-svc.ns.svc.cluster.local/admin?replicaSet=mg-0&ssl=false",
        "mongodb://sluice:pw@h:27017/admin?authSource=admin",
        "mongodb://sluice:pw@h:27017/",
    ],
)
def test_mongo_connection_string_rewritten(raw: str) -> None:
    """M1: the community operator's string names admin, the users' database."""
    got = thirdparty.mongo_data_uri(raw)
    before, after = urlsplit(raw), urlsplit(got)
    assert after.path == "/sluice"
    assert after.netloc == before.netloc and after.scheme == before.scheme
    q = parse_qs(after.query)
    assert q["authSource"] == ["admin"]
    assert {k: v for k, v in q.items() if k != "authSource"} == {
        k: v for k, v in parse_qs(before.query).items() if k != "authSource"
    }
    assert thirdparty.mongo_data_uri(got) == got  # idempotent


def test_mongodb_community_pull_policy_and_volumes(cfg: Config) -> None:
    """M3, M5: every container pulls as configured; both claims follow storage."""
    c = Config(image_pull_policy="Never", image_pull_secrets=["regcred"])
    obj = thirdparty.mongodb_community(
        c, make_pool(backend="mongodb", storage={"size": "5Gi", "storageClassName": "fast"}), 0
    )
    sts = obj["spec"]["statefulSet"]["spec"]
    pod = sts["template"]["spec"]
    names = {x["name"]: x for x in pod["containers"] + pod["initContainers"]}
    assert set(names) == {"mongod", "mongodb-agent", "mongod-posthook", "mongodb-agent-readinessprobe"}
    assert {x["imagePullPolicy"] for x in names.values()} == {"Never"}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    claims = {v["metadata"]["name"]: v["spec"] for v in sts["volumeClaimTemplates"]}
    assert set(claims) == {"data-volume", "logs-volume"}
    assert claims["data-volume"]["resources"]["requests"]["storage"] == "5Gi"
    assert {v["storageClassName"] for v in claims.values()} == {"fast"}


def test_mongodb_database_identity_per_namespace(cfg: Config) -> None:
    """M2: the community operator's pods run as mongodb-database in the Pool's namespace."""
    sa, role, binding = thirdparty.mongo_database_rbac(cfg, "shop")
    assert [o["kind"] for o in (sa, role, binding)] == ["ServiceAccount", "Role", "RoleBinding"]
    assert {o["metadata"]["name"] for o in (sa, role, binding)} == {"mongodb-database"}
    assert {o["metadata"]["namespace"] for o in (sa, role, binding)} == {"shop"}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mongodb-database"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mongodb-database", "namespace": "shop"}]
    verbs = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert verbs == {("secrets", "get"), ("pods", "get"), ("pods", "patch"), ("pods", "delete")}


def test_operator_may_grant_what_the_database_role_grants() -> None:
    """RBAC refuses to create a Role granting more than its creator holds."""
    import pathlib

    import yaml

    rbac = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
    role = next(d for d in yaml.safe_load_all(rbac.read_text()) if d and d["kind"] == "ClusterRole")
    held = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    for rule in thirdparty.MONGO_DATABASE_RULES:
        for g, r, v in itertools.product(rule["apiGroups"], rule["resources"], rule["verbs"]):
            assert (g, r, v) in held, f"operator lacks {r} {v}"
    for r in ("serviceaccounts", "roles", "rolebindings"):
        assert any(r in rule["resources"] and "create" in rule["verbs"] for rule in role["rules"])


def test_reconcile_switches_shape_and_nudges(
    store: Store,  # noqa: F811
    server: ZaqarDouble,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Pool reconciled end to end on the in-memory kube: replicas 1 -> 3 retires the
    Redis CRs first, creates the replicated shape only once their StatefulSets are gone,
    and nudges the new CRs while the shards do not answer."""
    monkeypatch.setattr(kube, "group_served", lambda gv: gv.startswith("redis.redis.opstreelabs.in"))
    monkeypatch.setattr(kube, "patch", store.patch)
    monkeypatch.setattr(probes, "probe", lambda uri, timeout, ca=None: (False, "no answer"))
    cfg = Config(server_url_template=server.url, probe_timeout=0.5)
    store.apply(
        {
            "kind": "Secret",
            "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
            "stringData": {"token": server.state.token},
        }
    )
    store.apply(make_pool(provisioner="redis-operator", shards=2, replicas=1))
    p = run_pool(cfg, store)
    assert p["status"]["provisioner"] == "redis-operator"
    assert [store.get("Redis", "shop", f"web-{i}") is not None for i in range(2)] == [True, True]
    # What the upstream manager makes of them.
    for i in range(2):
        store.apply(owned_by("Redis", name=f"web-{i}"))
    store.objs[("Pool", "shop", "web")]["spec"]["replicas"] = 3
    p = run_pool(cfg, store)
    assert all(store.get("Redis", "shop", f"web-{i}") is None for i in range(2))
    assert all(store.get("RedisReplication", "shop", f"web-{i}") is None for i in range(2))
    assert "StatefulSet web-0 of the previous Redis" in p["status"]["shards"][0]["message"]
    for i in range(2):  # the garbage collector follows the Redis CRs
        store.delete("StatefulSet", "shop", f"web-{i}")
    p = run_pool(cfg, store)
    repl = store.get("RedisReplication", "shop", "web-0")
    assert repl and repl["spec"]["clusterSize"] == 3 and store.get("RedisSentinel", "shop", "web-0")
    # Not answering yet: both CRs carry the nudge for the current ready count.
    assert repl["metadata"]["annotations"][thirdparty.NUDGE_ANNOTATION] == "ready=0"
    store.apply({**owned_by("RedisReplication"), "status": {"readyReplicas": 3}})
    run_pool(cfg, store)
    for kind in ("RedisReplication", "RedisSentinel"):
        live = store.get(kind, "shop", "web-0")
        assert live and live["metadata"]["annotations"][thirdparty.NUDGE_ANNOTATION] == "ready=3"
    assert p["status"]["phase"] == "Provisioning"


@pytest.mark.parametrize("replicas", [1, 3])
def test_redis_operator_shards_get_their_settings_first(replicas: int) -> None:
    """The settings ConfigMap is applied before the CR whose pods mount it, and the CR
    names it; the Sentinels get none."""
    objs = provisioning.shard_objects(Config(), make_pool(replicas=replicas), "redis-operator", 1)
    cm = objs[0]
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == "web-1-redis-config"
    conf = cm["data"]["redis-additional.conf"].splitlines()
    assert conf == [f"{name} {value}" for name, value in shard_settings.REDIS_SHARD_SETTINGS]
    data = [o for o in objs if o["kind"] in ("Redis", "RedisReplication")]
    assert [o["spec"]["redisConfig"] for o in data] == [{"additionalRedisConfig": "web-1-redis-config"}]
    assert all("redisConfig" not in o["spec"] for o in objs if o["kind"] == "RedisSentinel")
