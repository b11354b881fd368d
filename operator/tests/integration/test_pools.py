"""Pools on a real apiserver + scheduler with kwok metal and virtual nodes."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from .conftest import Operator, apply, condition, get, kc, operator_namespace, wait_for


def pool(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "backend": "redis",
        "provisioner": "builtin",
        "shards": 2,
        "replicas": 2,
        "storage": {"ephemeral": True},
        "placement": {"nodeClass": "metal", "policy": "required"},
    }
    body.update(spec)
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def pods_of(ns: str, shard: str) -> list[dict[str, Any]]:
    out = kc(
        "get",
        "pods",
        "-n",
        ns,
        "-l",
        f"sluice.dev/pool={shard.rsplit('-', 1)[0]},sluice.dev/shard={shard.rsplit('-', 1)[1]}",
        "-o",
        "json",
    )
    return json.loads(out.stdout)["items"]


def node_class(node: str) -> str:
    n = json.loads(kc("get", "node", node, "-o", "json").stdout)
    return n["metadata"]["labels"].get("sluice.dev/node-class", "")


def test_metal_required_binds_only_to_metal_nodes(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    apply(pool(ns, "web"))
    for shard in ("web-0", "web-1"):
        pods = wait_for(
            f"{shard} pods bound",
            lambda s=shard: (p := pods_of(ns, s)) and len(p) == 2 and all(x["spec"].get("nodeName") for x in p) and p,
            timeout=90,
        )
        assert {node_class(p["spec"]["nodeName"]) for p in pods} == {"metal"}
    obj = wait_for(
        "Schedulable=True",
        lambda: (o := get("pool", ns, "web")) and condition(o, "Schedulable").get("status") == "True" and o,
    )
    st = obj["status"]
    assert st["provisioner"] == "builtin" and "spec.provisioner" in st["provisionerReason"]
    assert condition(obj, "Provisioned")["status"] == "True"
    assert condition(obj, "Schedulable")["observedGeneration"] == obj["metadata"]["generation"]
    # Without a kubelet nothing answers PING: the Pool must not claim readiness.
    assert condition(obj, "Ready")["status"] == "False" and st["readyShards"] == "0/2"
    assert [s["name"] for s in st["shards"]] == ["web-0", "web-1"]
    assert obj["metadata"]["finalizers"] == ["sluice.dev/finalizer"]


def test_namespace_server_is_owned_by_every_pool(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    apply(pool(ns, "web"))
    apply(pool(ns, "batch", shards=1, replicas=1))

    def owners() -> list[str]:
        dep = get("deployment", ns, "sluice-server") or {}
        return sorted(o["name"] for o in dep.get("metadata", {}).get("ownerReferences", []))

    wait_for("server owned by both pools", lambda: owners() == ["batch", "web"])
    for kind, name in [
        ("service", "sluice-server"),
        ("pdb", "sluice-server"),
        ("statefulset", "sluice-catalog"),
        ("service", "sluice-catalog"),
        ("secret", "sluice-server-admin"),
    ]:
        obj = get(kind, ns, name)
        assert obj is not None, f"{kind}/{name} missing"
        assert {o["kind"] for o in obj["metadata"]["ownerReferences"]} == {"Pool"}
    dep = get("deployment", ns, "sluice-server")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "sluice.dev/sluice-server:dev" and c["securityContext"]["readOnlyRootFilesystem"] is True
    kc("delete", "pool", "batch", "-n", ns, "--timeout=60s")
    wait_for("batch gone from owners", lambda: owners() == ["web"])


def test_no_metal_nodes_is_reported(nometal_ns: tuple[str, Operator, str]) -> None:
    ns, _, key = nometal_ns
    apply(pool(ns, "web", shards=1, replicas=1))
    obj = wait_for(
        "Schedulable=False with the scheduler's reason",
        lambda: (o := get("pool", ns, "web")) and "scheduler:" in condition(o, "Schedulable").get("message", "") and o,
        timeout=90,
    )
    c = condition(obj, "Schedulable")
    assert c["status"] == "False" and c["reason"] == "NoMatchingNodes"
    assert f"no node carries {key}=metal" in c["message"]
    assert "scheduler: 0/" in c["message"] and "nodes are available" in c["message"]
    (p,) = pods_of(ns, "web-0")
    assert not p["spec"].get("nodeName")


def test_scale_up_and_down_without_queues(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    apply(pool(ns, "elastic", shards=3, replicas=1))
    wait_for("3 shards", lambda: len(((get("pool", ns, "elastic") or {}).get("status") or {}).get("shards", [])) == 3)
    kc("patch", "pool", "elastic", "-n", ns, "--type=merge", "-p", '{"spec":{"shards":1}}')
    wait_for(
        "extra shard workloads removed",
        lambda: get("statefulset", ns, "elastic-2") is None and get("statefulset", ns, "elastic-1") is None,
        timeout=60,
    )
    obj = get("pool", ns, "elastic")
    assert [s["name"] for s in obj["status"]["shards"]] == ["elastic-0"]


def test_killed_mid_reconcile_converges_without_duplicates(metal_ns: tuple[str, Operator]) -> None:
    ns, op = metal_ns
    apply(pool(ns, "crash", shards=3, replicas=1))
    # Kill as soon as the first shard exists: the rest of the reconcile never ran.
    wait_for("first shard", lambda: get("statefulset", ns, "crash-0"), timeout=60, interval=0.05)
    op.kill()
    op.start()
    obj = wait_for(
        "converged after restart",
        lambda: (o := get("pool", ns, "crash")) and len((o.get("status") or {}).get("shards", [])) == 3 and o,
        timeout=90,
    )
    out = kc("get", "statefulsets,services", "-n", ns, "-l", "sluice.dev/pool=crash", "-o", "json")
    names = sorted(i["metadata"]["name"] for i in json.loads(out.stdout)["items"])
    assert names == sorted([f"crash-{i}" for i in range(3)] * 2 + [f"crash-{i}-headless" for i in range(3)]), names
    assert [s["name"] for s in obj["status"]["shards"]] == ["crash-0", "crash-1", "crash-2"]


def test_a_spec_the_shards_cannot_carry_is_reported(metal_ns: tuple[str, Operator]) -> None:
    """A toleration the apiserver refuses in the StatefulSet (the CRD passes them through
    unchecked, as Kubernetes' own type) leaves Provisioned False with the apiserver's words."""
    ns, _ = metal_ns
    bad = {"key": "it.sluice.dev/x", "operator": "Sometimes", "effect": "NoSchedule"}
    apply(pool(ns, "badtol", shards=1, replicas=1, placement={"nodeClass": "any", "tolerations": [bad]}))
    obj = wait_for(
        "Provisioned=False with the apiserver's message",
        lambda: (o := get("pool", ns, "badtol")) and condition(o, "Provisioned").get("status") == "False" and o,
        timeout=60,
    )
    c = condition(obj, "Provisioned")
    assert c["reason"] == "NotProvisionable", c
    assert '"badtol-0" is invalid' in c["message"] and "tolerations[0].operator" in c["message"], c
    assert obj["status"]["phase"] != "Ready", obj["status"]
    kc("delete", "pool", "badtol", "-n", ns, "--wait=true", "--timeout=60s")


def test_server_settings_the_apiserver_refuses_are_reported(
    sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The server's placement comes from the operator's settings (the chart's
    server.placement); a node selector the apiserver refuses in the server's Deployment
    leaves each Pool Failed with the apiserver's message, not in a retry loop."""
    placement = {"nodeClass": "any", "nodeSelector": {"it.sluice.dev/zone": "not a label value"}}
    env = {"SLUICE_OPERATOR_SERVER_PLACEMENT": json.dumps(placement)}
    with operator_namespace(sa_kubeconfig, tmp_path_factory, "sit-badserver", env) as (ns, _):
        apply(pool(ns, "web", shards=1, replicas=1))
        obj = wait_for(
            "Ready=False with the apiserver's message",
            lambda: (o := get("pool", ns, "web")) and condition(o, "Ready").get("status") == "False" and o,
            timeout=60,
        )
        c = condition(obj, "Provisioned")
        assert c["status"] == "False" and c["reason"] == "NotProvisionable", c
        assert "Deployment" in c["message"] and "nodeSelector" in c["message"], c
        assert obj["status"]["phase"] == "Failed", obj["status"]
