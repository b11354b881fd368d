"""The apiserver rejects bad specs with the schema's own message."""

from __future__ import annotations

import pytest
import yaml

from .conftest import Operator, apply, kc, wait_for


def attempt(ns: str, kind: str, name: str, spec: dict) -> str:
    doc = {"apiVersion": "sluice.dev/v1alpha1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}
    out = kc("apply", "-f", "-", stdin=yaml.safe_dump(doc), check=False)
    assert out.returncode != 0, f"{spec} was accepted"
    return out.stderr


@pytest.mark.parametrize(
    "kind,spec,needle",
    [
        ("Pool", {"backend": "cassandra"}, 'Unsupported value: "cassandra"'),
        ("Pool", {"backend": "redis", "shards": 0}, "should be greater than or equal to 1"),
        ("Pool", {"backend": "redis", "placement": {"nodeClass": "gpu"}}, 'Unsupported value: "gpu"'),
        ("Pool", {"backend": "redis", "provisioner": "external"}, "provisioner external needs spec.external.secretRef"),
        ("Pool", {"backend": "mongodb", "provisioner": "builtin"}, "builtin MongoDB shards need spec.image"),
        (
            "Pool",
            {"backend": "redis", "provisioner": "mongodb-community"},
            "mongodb-community serves backend mongodb only",
        ),
        (
            "Pool",
            {"backend": "redis", "provisioner": "redis-operator", "storage": {"ephemeral": True}},
            "storage.ephemeral needs provisioner builtin",
        ),
        (
            "Pool",
            {"backend": "mongodb", "provisioner": "mongodb-community", "storage": {"ephemeral": True}},
            "storage.ephemeral needs provisioner builtin",
        ),
        ("Queue", {"pool": "web", "messageTTL": 10}, "should be greater than or equal to 60"),
        ("Queue", {"pool": "web", "name": "no spaces"}, "should match"),
        ("Queue", {}, "spec.pool: Required value"),
        ("Queue", {"pool": "web", "subscriptions": [{"subscriber": "ftp://h/x"}]}, "should match"),
        (
            "Queue",
            {"pool": "web", "subscriptions": [{"subscriber": "http://h/x", "ttl": 59}]},
            "greater than or equal to 60",
        ),
        (
            "Queue",
            {"pool": "web", "subscriptions": [{"subscriber": "http://h/x", "options": {"secret": "s"}}]},
            'options" must not validate the schema (not)',
        ),
        (
            "Queue",
            {"pool": "web", "subscriptions": [{"subscriber": "http://h/x"}, {"subscriber": "http://h/x"}]},
            "Duplicate value",
        ),
        ("Benchmark", {"scenario": "custom"}, "scenario custom needs spec.custom"),
        ("Benchmark", {"scenario": "flood", "move": {"pool": "web-1"}}, "spec.move needs a timed load with queues"),
        (
            "Benchmark",
            {"scenario": "task-distribution", "duration": 5, "move": {"pool": "web-1", "afterSeconds": 5}},
            "spec.move.afterSeconds must fall within the load",
        ),
        (
            "Benchmark",
            {"scenario": "task-distribution", "target": {"url": "http://zaqar:8888"}, "move": {"pool": "web-1"}},
            "with target.url, spec.move needs adminTokenSecretRef",
        ),
        ("Benchmark", {"scenario": "task-distribution", "move": {}}, "spec.move.pool: Required value"),
        ("Benchmark", {"scenario": "teleport"}, 'Unsupported value: "teleport"'),
        (
            "Benchmark",
            {"scenario": "task-distribution", "faults": [{"at": 5, "action": "delete", "target": "shard"}]},
            "a shard fault names the Pool (pool) and the shard's index (shard)",
        ),
        (
            "Benchmark",
            {"scenario": "task-distribution", "faults": [{"at": 5, "action": "kill", "target": "server", "pool": "p"}]},
            "pool and shard go with target shard only",
        ),
        (
            "Benchmark",
            {
                "scenario": "task-distribution",
                "faults": [{"at": 5, "action": "scale", "target": "catalog", "replicas": 2}],
            },
            "scale resizes the sluice-server Deployment: target server with replicas",
        ),
        (
            "Benchmark",
            {
                "scenario": "task-distribution",
                "faults": [{"at": 5, "action": "kill", "target": "server", "replicas": 2}],
            },
            "replicas goes with action scale only",
        ),
        (
            "Benchmark",
            {"scenario": "task-distribution", "faults": [{"at": 5, "action": "drain", "target": "operator"}]},
            "drain takes a server, shard or catalog pod's node",
        ),
        (
            "Benchmark",
            {"scenario": "task-distribution", "faults": [{"at": -1, "action": "kill", "target": "server"}]},
            "should be greater than or equal to 0",
        ),
        (
            "Benchmark",
            {"scenario": "task-distribution", "faults": [{"at": 1, "action": "reboot", "target": "server"}]},
            'Unsupported value: "reboot"',
        ),
    ],
)
def test_invalid_specs_rejected(metal_ns: tuple[str, Operator], kind: str, spec: dict, needle: str) -> None:
    ns, _ = metal_ns
    assert needle in attempt(ns, kind, "bad", spec)


def test_immutable_fields(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    q = {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "imm", "namespace": ns},
        "spec": {"pool": "nopool", "name": "first"},
    }
    apply(q)
    q["spec"]["name"] = "second"
    out = apply(q, check=False)
    assert out.returncode != 0 and "spec.name is immutable" in out.stderr
    p = {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": "immp", "namespace": ns},
        "spec": {"backend": "redis", "shards": 1, "storage": {"ephemeral": True}},
    }
    apply(p)
    p["spec"]["backend"] = "mongodb"
    p["spec"]["image"] = "x"
    out = apply(p, check=False)
    assert out.returncode != 0 and "spec.backend is immutable" in out.stderr
    kc("delete", "queue", "imm", "-n", ns, "--timeout=60s")
    kc("delete", "pool", "immp", "-n", ns, "--timeout=60s")
    wait_for("gone", lambda: kc("get", "pool", "immp", "-n", ns, check=False).returncode != 0)


def test_kubectl_get_sluice_lists_every_kind(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    out = kc("get", "sluice", "-n", ns, check=False)
    assert out.returncode == 0, out.stderr


DURATION_ACTIONS = ("fill", "delay", "partition", "slow-receiver")


def fault_allowed(f: dict, scenario: str) -> bool:
    """fault_allowed is the model of the fault rules the CRD's CEL states."""
    a, t = f["action"], f["target"]
    has = f.__contains__
    return (
        (t != "shard" or (has("pool") and has("shard")))
        and (t == "shard" or not (has("pool") or has("shard")))
        and (a != "scale" or (t == "server" and has("replicas")))
        and (not has("replicas") or a == "scale")
        and (a != "drain" or t != "operator")
        and (a not in ("fill", "delay", "partition") or t == "shard")
        and ((a == "slow-receiver") == (t == "receiver"))
        and ((a in DURATION_ACTIONS) == has("duration"))
        and (a in ("delay", "slow-receiver") or not (has("latencyMs") or has("jitterMs")))
        and (a != "delay" or has("latencyMs"))
        and (not has("jitterMs") or (a == "delay" and f["jitterMs"] <= f.get("latencyMs", -1)))
        and (a == "slow-receiver" or not has("failPercent"))
        and (a != "slow-receiver" or f.get("latencyMs", 0) > 0 or f.get("failPercent", 0) > 0)
        and (a != "slow-receiver" or scenario == "notifications")
    )


def test_fault_rules_generated(metal_ns: tuple[str, Operator]) -> None:
    """Generated faults, each in a Benchmark applied with a server-side dry run:
    the apiserver accepts exactly those the rule model accepts, and a refusal
    carries one of the CRD's messages."""
    import random

    ns, _ = metal_ns
    rng = random.Random(57)
    actions = ["delete", "kill", "scale", "drain", "fill", "delay", "partition", "slow-receiver"]
    targets = ["server", "shard", "catalog", "operator", "receiver"]
    accepted = refused = 0
    for i in range(48):
        a = actions[i % len(actions)]
        # Mostly the fields the action takes, sometimes others: both sides of every rule.
        t = {"fill": "shard", "delay": "shard", "partition": "shard", "slow-receiver": "receiver"}.get(a, "server")
        f: dict = {"at": 1, "action": a, "target": t if rng.random() < 0.7 else rng.choice(targets)}
        if f["target"] == "shard" and rng.random() < 0.9:
            f.update(pool="p", shard=0)
        if (a in DURATION_ACTIONS) != (rng.random() < 0.15):
            f["duration"] = rng.choice([1, 8, 3600])
        if a in ("delay", "slow-receiver") or rng.random() < 0.1:
            if rng.random() < 0.85:
                f["latencyMs"] = rng.choice([0, 50, 100])
            if rng.random() < 0.4:
                f["jitterMs"] = rng.choice([0, 20, 200])
        if (a == "slow-receiver" or rng.random() < 0.1) and rng.random() < 0.7:
            f["failPercent"] = rng.choice([0, 50, 100])
        if a == "scale":
            f["replicas"] = 2
        scenario = "notifications" if rng.random() < 0.8 else "task-distribution"
        doc = {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Benchmark",
            "metadata": {"name": f"gen-{i}", "namespace": ns},
            "spec": {"scenario": scenario, "faults": [f]},
        }
        out = kc("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc), check=False)
        want = fault_allowed(f, scenario)
        assert (out.returncode == 0) == want, f"{scenario} {f}: model says {want}, apiserver: {out.stderr}"
        if want:
            accepted += 1
        else:
            refused += 1
            assert "spec.faults[0]" in out.stderr or "slow-receiver" in out.stderr, out.stderr
    # Both outcomes are exercised.
    assert accepted >= 10 and refused >= 10, (accepted, refused)
