"""The real MongoDB community operator (v0.9.0's replica-set controller, built
from its module by `make mongodb-operator-binary`) against the control plane
with simulated nodes: the StatefulSet it makes from a Pool's MongoDBCommunity
carries our override (pull policy, claims) and runs as the namespace identity
the operator created; deleting the Pool removes the MongoDBCommunity.
The members' start-up (the agent's part, played on simulated pods) is not
covered yet: on simulated nodes the member pods never all appeared."""

from __future__ import annotations

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
    wait_for,
)

BINARY = ROOT / "build/bin/mongodb-operator"
CRD = "mongodbcommunity.mongodbcommunity.mongodb.com"
LABEL = "sluice.dev/test=mongodb-community"


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
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
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
    kc("delete", "pool", "mg", "-n", ns, "--timeout=120s")
    wait_for("MongoDBCommunity gone with the Pool", lambda: get("mongodbcommunity", ns, "mg-0") is None, timeout=120)
