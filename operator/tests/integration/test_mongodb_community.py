"""The real MongoDB community operator (v0.9.0's replica-set controller, built
from its module by `make mongodb-operator-binary`) against the control plane
with simulated nodes: the StatefulSet it makes from a Pool's MongoDBCommunity
carries our override (pull policy, claims) and runs as the namespace identity
the operator created; the test plays only the agents' part (the readiness
annotation the agent writes on each member pod), so the members start one
after another as the operator's own StatefulSet pods, the operator writes its
own connection Secret, and the Pool takes its shard's endpoint from it (M6);
deleting the Pool removes the MongoDBCommunity. (The simulated nodes renew
node leases, docs/cluster.md: without them kwok's slow status updates on a
busy machine let the nodes go Unknown and the OrderedReady members never all
appeared.)"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from ..support import unavailable
from . import upstream_crds
from .conftest import (
    KUBECONFIG,
    ROOT,
    Operator,
    _no_forbidden,
    apply,
    drop_namespace,
    free_port,
    get,
    kc,
    make_namespace,
    stop_process,
    wait_for,
)

BINARY = ROOT / "build/bin/mongodb-operator"
CRD = "mongodbcommunity.mongodbcommunity.mongodb.com"
LABEL = "sluice.dev/test=mongodb-community"
# What the agents' readiness probe writes on a member pod when its agent reached a config version.
AGENT_VERSION = "agent.mongodb.com/version"


def _need(ok: bool, msg: str) -> None:
    if not ok:
        unavailable(msg)


@pytest.fixture(scope="module")
def community(
    sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Operator, subprocess.Popen]]:
    """A namespace with a sluice operator and the community operator's controller, both
    watching it, and the upstream CRD (left alone when a real installation has it)."""
    _need(BINARY.exists(), f"{BINARY} missing (make mongodb-operator-binary)")
    ours = kc("get", "crd", CRD, check=False).returncode != 0
    if ours:
        try:
            docs = [d for d in upstream_crds.crds() if d["metadata"]["name"] == CRD]
        except upstream_crds.Unavailable as exc:
            _need(False, f"upstream CRDs unavailable: {exc}")
        docs[0]["metadata"].setdefault("labels", {})["sluice.dev/test"] = "mongodb-community"
        kc("apply", "--server-side", "--field-manager=sluice-it", "-f", "-", stdin=yaml.safe_dump_all(docs))
    kc("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    ns = make_namespace("sit-mdbc")
    logs = tmp_path_factory.mktemp("mdbc")
    op = Operator(sa_kubeconfig, ns, logs / "operator.log", {})
    log = (logs / "community-operator.log").open("w")
    env = {
        **os.environ,
        "KUBECONFIG": str(KUBECONFIG),
        "WATCH_NAMESPACE": ns,
        # Names only: simulated nodes pull nothing.
        "AGENT_IMAGE": "quay.io/mongodb/mongodb-agent-ubi:107.0.1.8507-1",
        "VERSION_UPGRADE_HOOK_IMAGE": "quay.io/mongodb/version-upgrade-post-start-hook:1.0.8",
        "READINESS_PROBE_IMAGE": "quay.io/mongodb/mongodb-kubernetes-readinessprobe:1.0.17",
        "MONGODB_IMAGE": "mongodb-community-server",
        "MONGODB_REPO_URL": "quay.io/mongodb",
    }
    proc = subprocess.Popen(
        [str(BINARY), "--metrics-bind-address", f"127.0.0.1:{free_port()}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield ns, op, proc
    try:
        drop_namespace(ns)
    finally:
        op.stop()
        stop_process(proc)
        log.close()
        if ours:
            kc("delete", "crd", "-l", LABEL, "--timeout=90s", check=False)
    _no_forbidden(op)


def test_community_operator_provisions_the_shard(community: tuple[str, Operator, subprocess.Popen]) -> None:
    ns, _, proc = community
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "mg", "namespace": ns},
            "spec": {
                "backend": "mongodb",
                "provisioner": "mongodb-community",
                "shards": 1,
                "replicas": 3,
                "storage": {"size": "2Gi"},
                "placement": {"nodeClass": "any"},
            },
        }
    )
    # The StatefulSet is the community operator's, shaped by our override.
    sts = wait_for("StatefulSet mg-0 from the community operator", lambda: get("statefulset", ns, "mg-0"), timeout=120)
    assert proc.poll() is None, "the community operator exited"
    assert {o["kind"] for o in sts["metadata"]["ownerReferences"]} == {"MongoDBCommunity"}
    pod = sts["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mongodb-database"
    pulls = {c["name"]: c.get("imagePullPolicy") for c in pod["containers"] + pod["initContainers"]}
    assert pulls == dict.fromkeys(
        ["mongod", "mongodb-agent", "mongod-posthook", "mongodb-agent-readinessprobe"], "IfNotPresent"
    ), pulls
    claims = {c["metadata"]["name"]: c["spec"] for c in sts["spec"]["volumeClaimTemplates"]}
    assert claims["data-volume"]["resources"]["requests"]["storage"] == "2Gi" and "logs-volume" in claims
    # Its pods can exist only because the namespace has the identity they run as.
    assert get("serviceaccount", ns, "mongodb-database") and get("rolebinding", ns, "mongodb-database")
    agents_at_goal(ns, "mg-0", 3)
    mdb = wait_for(
        "MongoDBCommunity mg-0 Running",
        lambda: (o := get("mongodbcommunity", ns, "mg-0")) and (o.get("status") or {}).get("phase") == "Running" and o,
        timeout=120,
        interval=2,
    )
    assert mdb["status"]["currentStatefulSetReplicas"] == 3
    # M6: the connection Secret is the community operator's, and the Pool adopts it.
    conn = wait_for("its connection Secret", lambda: get("secret", ns, "mg-0-connection"), timeout=60)
    assert {o["kind"] for o in conn["metadata"].get("ownerReferences") or []} == {"MongoDBCommunity"}
    shard = wait_for(
        "the Pool reading it",
        lambda: next(
            (s for s in (get("pool", ns, "mg") or {}).get("status", {}).get("shards", []) if s.get("endpoint")), None
        ),
        timeout=60,
    )
    assert "mg-0-0.mg-0-svc" in shard["endpoint"], shard
    kc("delete", "pool", "mg", "-n", ns, "--timeout=120s")
    wait_for("MongoDBCommunity gone with the Pool", lambda: get("mongodbcommunity", ns, "mg-0") is None, timeout=120)


def agents_at_goal(ns: str, name: str, members: int) -> None:
    """agents_at_goal plays the agents' readiness probe, the one part of a member that
    cannot run on a simulated node: it annotates each member pod with the automation
    config version the operator wrote, which is what the operator waits for."""

    def step() -> bool:
        secret = get("secret", ns, f"{name}-config")
        if not secret:
            return False
        version = str(json.loads(base64.b64decode(secret["data"]["cluster-config.json"]))["version"])
        pods = [get("pod", ns, f"{name}-{i}") for i in range(members)]
        for p in pods:
            if p and (p["metadata"].get("annotations") or {}).get(AGENT_VERSION) != version:
                kc("annotate", "pod", p["metadata"]["name"], "-n", ns, f"{AGENT_VERSION}={version}", "--overwrite")
        return all(p and p.get("status", {}).get("phase") == "Running" for p in pods)

    try:
        wait_for(f"{members} members of {name} at the agents' goal", step, timeout=180, interval=2)
    except AssertionError as exc:
        state = kc("get", "pods,pvc,statefulset", "-n", ns, "-o", "wide", check=False).stdout
        events = kc("get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False).stdout[-3000:]
        raise AssertionError(f"{exc}\n{state}\n{events}") from exc
