"""Least privilege: the permissions Benchmark faults need and the condition a
Benchmark gets without them, the RBAC manifests that grant them (drains only
through the opt-in roles), and the NetworkPolicies of the metrics port and of
mongodb-community shards."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from sluice_operator import events, kube
from sluice_operator.builders import common, netpol, server, thirdparty
from sluice_operator.config import Config, ConfigError
from sluice_operator.handlers import benchmark as bh
from sluice_operator.handlers import faults, provisioning, shards

from .conftest import make_pool
from .kube_double import Patch, Store

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"
NS = "shop"
DRAIN = {"at": 5, "action": "drain", "target": "server"}
KILLS = [
    {"at": 1, "action": "kill", "target": "server"},
    {"at": 2, "action": "delete", "target": "shard", "pool": "web", "shard": 0},
    {"at": 3, "action": "kill", "target": "catalog"},
]


def _rules(path: pathlib.Path) -> dict[str, set[tuple[str, str, str]]]:
    """_rules: (group, resource, verb) granted by each ClusterRole of a manifest."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] == "ClusterRole":
            out[doc["metadata"]["name"]] = {
                (g, r, v)
                for rule in doc["rules"]
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return out


def _grant(a: faults.Access) -> tuple[str, str, str]:
    return (a.group, a.resource + (f"/{a.subresource}" if a.subresource else ""), a.verb)


# The faults that kill no process.
NO_KILLS = [
    {"at": 1, "action": a, "target": "shard", "pool": "p", "shard": 0, "duration": 5, "latencyMs": 10}
    for a in ("fill", "delay", "partition")
] + [{"at": 1, "action": "slow-receiver", "target": "receiver", "duration": 5, "failPercent": 50}]


def test_required_access_per_fault() -> None:
    every = [*KILLS, {"at": 4, "action": "scale", "target": "server", "replicas": 3}, DRAIN]
    every.append({"at": 6, "action": "kill", "target": "operator"})
    got = [a.describe() for a in faults.required_access(every, NS, "sluice-system")]
    assert got == [
        "delete pods in namespace shop",  # once for the three pod faults
        "patch deployments.apps in namespace shop",
        "patch nodes (cluster-wide)",
        "create pods/eviction in namespace shop",
        "delete pods in namespace sluice-system",
    ]
    # An operator outside the cluster has no pod to delete: nothing to ask.
    assert faults.required_access([every[-1]], NS, "") == []


def test_default_role_cannot_drain_and_the_opt_in_roles_can() -> None:
    """deploy/rbac.yaml holds what deleting, killing, scaling and slow-receiver need
    and neither nodes patch, pods/eviction nor pods/ephemeralcontainers;
    deploy/rbac-faults.yaml holds exactly those, in the roles that the
    missing-permission message names."""
    (default,) = _rules(DEPLOY / "rbac.yaml").values()
    opt_in = _rules(DEPLOY / "rbac-faults.yaml")
    assert opt_in == {
        "sluice-operator-faults": {("", "pods/eviction", "create"), ("", "pods/ephemeralcontainers", "patch")},
        "sluice-operator-node-faults": {("", "nodes", "patch")},
    }
    assert not default & (opt_in["sluice-operator-faults"] | opt_in["sluice-operator-node-faults"])
    every = [*KILLS, {"at": 4, "action": "scale", "target": "server", "replicas": 3}, DRAIN, *NO_KILLS]
    for a in faults.required_access(every, NS, "sluice-system"):
        roles = [name for name, held in opt_in.items() if _grant(a) in held]
        if roles:
            assert f"ClusterRole {roles[0]} " in a.grant, a
        else:
            assert _grant(a) in default, f"deploy/rbac.yaml lacks {a.describe()}"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store()
    for fn in ("get", "list_objects", "apply", "delete"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))
    return s


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    monkeypatch.setattr(events, "info", lambda b, reason, message: out.append(("Normal", reason, message)))
    monkeypatch.setattr(events, "warn", lambda b, reason, message: out.append(("Warning", reason, message)))
    return out


SETTINGS = bh.Settings(start_delay=1, unschedulable_grace=5, setup_timeout=60, interval=1)


def _bench(fault_list: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": "td", "namespace": NS, "uid": "u1", "generation": 1},
        "spec": {
            "scenario": "task-distribution",
            "parallelism": 1,
            "placement": {},
            "target": {},
            "faults": fault_list,
        },
    }


def _step(body: dict[str, Any]) -> dict[str, Any]:
    patch = Patch()
    bh.reconcile(Config(), SETTINGS, copy.deepcopy(body), patch)
    st = dict(body.get("status") or {})
    for k, v in patch.status.items():
        if v is None:
            st.pop(k, None)
        else:
            st[k] = v
    body["status"] = st
    return body


def _condition(body: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in body["status"]["conditions"] if c["type"] == "FaultsPermitted"]
    return c


def test_drain_without_permission_waits_with_a_condition_naming_it(
    store: Store, posted: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked for a drain the operator may not perform, a Benchmark stays Pending with
    FaultsPermitted=False naming each missing permission and how to grant it, creates
    no Job, warns once; granted, the run starts; never granted, it fails after the
    setup timeout."""
    granted: set[tuple[str, str, str, str, str]] = {("delete", "", "pods", "", NS)}
    asked: list[tuple[str, ...]] = []

    def can_i(verb: str, resource: str, namespace: str = "", group: str = "", subresource: str = "") -> bool:
        asked.append((verb, group, resource, subresource, namespace))
        return (verb, group, resource, subresource, namespace) in granted

    monkeypatch.setattr(kube, "can_i", can_i)
    body = _step(_bench([KILLS[0], DRAIN]))
    st = body["status"]
    assert (st["phase"], st["reason"]) == ("Pending", "FaultsNotPermitted"), st
    c = _condition(body)
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", "MissingPermission", 1)
    for text in (
        "patch nodes (cluster-wide) (drain cordons the node)",
        "benchmarkFaults.nodeDrain=true",
        f"create pods/eviction in namespace {NS}",
        "ClusterRole sluice-operator-faults",
    ):
        assert text in c["message"], c["message"]
    assert "delete pods" not in c["message"]
    assert st["message"] == c["message"]
    assert not [k for k in store.objs if k[0] == "Job"]
    assert [p[:2] for p in posted if p[1] == "FaultsNotPermitted"] == [("Warning", "FaultsNotPermitted")]

    # Still missing on the next tick: no second warning.
    body = _step(body)
    assert body["status"]["reason"] == "FaultsNotPermitted"
    assert len([p for p in posted if p[1] == "FaultsNotPermitted"]) == 1

    # Granted (helm upgrade --set benchmarkFaults...): the run starts on the next tick.
    granted |= {("patch", "", "nodes", "", ""), ("create", "", "pods", "eviction", NS)}
    body = _step(body)
    st = body["status"]
    assert (st["phase"], st["reason"], st["jobName"]) == ("Pending", "Starting", "td-r1"), st
    c = _condition(body)
    assert (c["status"], c["reason"]) == ("True", "Permitted")

    # Never granted: Failed once the setup timeout has passed.
    granted.clear()
    store.objs.clear()
    body = _step(_bench([DRAIN]))
    body["status"]["runCreated"] = "2020-01-01T00:00:00Z"
    st = _step(body)["status"]
    assert (st["phase"], st["reason"], st["verdict"]) == ("Failed", "FaultsNotPermitted", "Fail")
    assert "gave up after" in st["message"] and "patch nodes" in st["message"]


def test_benchmark_without_faults_asks_nothing(
    store: Store, posted: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def can_i(*a: Any) -> bool:
        raise AssertionError("no fault, no access review")

    monkeypatch.setattr(kube, "can_i", can_i)
    body = _bench([])
    del body["spec"]["faults"]
    st = _step(body)["status"]
    assert st["reason"] == "Starting" and not [c for c in st["conditions"] if c["type"] == "FaultsPermitted"]


def test_unanswered_review_is_left_to_the_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    def can_i(*a: Any) -> bool:
        raise ApiException(status=503, reason="Service Unavailable")

    monkeypatch.setattr(kube, "can_i", can_i)
    assert faults.missing_access(_bench([DRAIN])) == []


def _forbidden(message: str) -> ApiException:
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def test_drain_refused_after_its_cordon_names_the_refusal_and_is_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Store()
    for fn in ("get", "list_objects", "patch"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))
    cordons: list[tuple[str, bool]] = []
    monkeypatch.setattr(kube, "cordon", lambda node, on: cordons.append((node, on)))
    said = (
        'pods "sluice-server-a" is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods/eviction"'
    )

    def evict(ns: str, name: str) -> None:
        raise _forbidden(said)

    monkeypatch.setattr(kube, "evict", evict)
    lbls = common.labels(Config(), "server")
    s.apply(
        {
            "kind": "Pod",
            "metadata": {"name": "sluice-server-a", "namespace": NS, "labels": lbls},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running"},
        }
    )
    r = faults.inject(Config(), NS, faults.Due(0, DRAIN, None))
    assert (r["result"], r["node"]) == ("Failed", "n1")
    assert said in r["message"] and "node n1 cordoned" in r["message"]
    assert faults.restore(Config(), NS, [r]) == ["node n1 uncordoned"]
    assert cordons == [("n1", True), ("n1", False)]

    # Refused before anything happened: the apiserver's sentence, nothing to undo.
    def cordon(node: str, on: bool) -> None:
        raise _forbidden('nodes "n1" is forbidden: User "u" cannot patch resource "nodes"')

    monkeypatch.setattr(kube, "cordon", cordon)
    r = faults.inject(Config(), NS, faults.Due(0, DRAIN, None))
    assert r["result"] == "Failed" and "node" not in r
    assert r["message"] == 'drain server: nodes "n1" is forbidden: User "u" cannot patch resource "nodes"'


def test_server_serves_metrics_on_a_port_of_its_own() -> None:
    cfg = Config()
    dep = server.deployment(cfg, NS, [])
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 8888, "metrics": server.METRICS_PORT}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["SLUICE_METRICS_LISTEN"] == "0.0.0.0:9464" and env["SLUICE_METRICS"] == "true"
    svc = server.service(cfg, NS, [])
    assert {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]} == {
        "http": (8888, "http"),
        "metrics": (9464, "metrics"),
    }
    assert [e["port"] for e in server.service_monitor(cfg, NS, [])["spec"]["endpoints"]] == ["metrics"]
    tls_monitor = server.service_monitor(Config(server_tls=True), NS, [])
    assert tls_monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert tls_monitor["spec"]["endpoints"][0]["scheme"] == "https"


def test_metrics_port_admits_only_the_configured_namespaces() -> None:
    env = {
        "SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR": json.dumps(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["observability"]}]}
        )
    }
    cfg = Config.from_env(env)
    clients, scrapers = netpol.server(cfg, NS, [])["spec"]["ingress"]
    assert clients == {"ports": [{"protocol": "TCP", "port": cfg.server_port}]}
    assert scrapers == {
        "from": [{"namespaceSelector": json.loads(env["SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR"])}],
        "ports": [{"protocol": "TCP", "port": server.METRICS_PORT}],
    }
    assert Config.from_env({}).metrics_namespace_selector == {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
    }
    for bad in ("{}", "[]", '{"matchLabels": []}', '{"namespaceSelector": {}}', "not json"):
        with pytest.raises(ConfigError, match="METRICS_NAMESPACE_SELECTOR"):
            Config.from_env({"SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR": bad})


def _mongo_pool() -> dict[str, Any]:
    return make_pool(backend="mongodb", provisioner="mongodb-community", replicas=3)


def test_mongodb_community_shard_policy() -> None:
    """Each mongodb-community shard's members, selected by the label the community
    operator (v0.9.0) gives them, accept 27017 from the namespace's servers, from
    each other and from the operator, and nothing else."""
    cfg = Config(namespace="sluice-system", network_policy_cidrs=("10.0.0.5/32",))
    pol = netpol.mongodb_community(cfg, _mongo_pool(), 1)
    assert pol["metadata"]["name"] == "web-1-mongodb" and pol["metadata"]["namespace"] == NS
    assert (
        pol["metadata"]["labels"][common.LABEL_POOL] == "web" and pol["metadata"]["labels"][common.LABEL_SHARD] == "1"
    )
    members = {"podSelector": {"matchLabels": {"app": "web-1-svc"}}}
    assert pol["spec"]["podSelector"] == members["podSelector"]
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = pol["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 27017}]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "server"}}},
        members,
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sluice-system"}}},
        {"ipBlock": {"cidr": "10.0.0.5/32"}},
    ]
    # The Service the community operator names after the shard is the governing
    # one, whose name is the pods' app label (the endpoints read mg-0-0.mg-0-svc).
    assert thirdparty.mongo_service_name("web-1") == "web-1-svc"


def test_mongodb_community_policy_comes_and_goes_with_its_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = provisioning.shard_objects(Config(), _mongo_pool(), "mongodb-community", 0)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("MongoDBCommunity", "web-0"),
        ("NetworkPolicy", "web-0-mongodb"),
    ]
    off = provisioning.shard_objects(Config(network_policies=False), _mongo_pool(), "mongodb-community", 0)
    assert [o["kind"] for o in off] == ["MongoDBCommunity"]
    deleted: list[tuple[str, str]] = []
    monkeypatch.setattr(kube, "delete", lambda kind, ns, name: deleted.append((kind, name)) or True)
    shards.delete_workloads(NS, "mongodb-community", "web-0")
    assert ("NetworkPolicy", "web-0-mongodb") in deleted
    # Deleting it is granted; the operator never needed it before.
    (default,) = _rules(DEPLOY / "rbac.yaml").values()
    assert ("networking.k8s.io", "networkpolicies", "delete") in default


def test_redis_operator_pods_are_selected_by_the_backends_policy() -> None:
    """redis-operator copies a CR's labels into its pods: every CR of every shape
    (Redis; RedisReplication and RedisSentinel) carries what sluice-backends selects."""
    cfg = Config()
    (backends,) = [p for p in netpol.desired(cfg, NS, []) if p["metadata"]["name"] == "sluice-backends"]
    want = backends["spec"]["podSelector"]["matchLabels"].items()
    for replicas, kinds in ((1, ["Redis"]), (3, ["RedisReplication", "RedisSentinel"])):
        crs = thirdparty.redis_objects(cfg, make_pool(provisioner="redis-operator", replicas=replicas), 0)
        assert [c["kind"] for c in crs] == kinds
        for cr in crs:
            assert cr["metadata"]["labels"].items() >= want, cr["kind"]
    (rule,) = backends["spec"]["ingress"]
    assert {p["port"] for p in rule["ports"]} >= {6379, thirdparty.SENTINEL_PORT}
