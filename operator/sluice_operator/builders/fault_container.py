"""The ephemeral container that performs a Benchmark's fill, delay or partition
fault inside a shard's pod: `sluice-bench fault` from the sluice-bench image,
sharing the pod's network namespace, so the fault touches that pod's traffic
and nothing outside it, and undoing itself when its duration ends."""

from __future__ import annotations

import hashlib
from typing import Any

from ..config import Config
from . import common

# Faults performed by an ephemeral container in the shard's pod.
CONTAINER_ACTIONS = ("fill", "delay", "partition")
# Faults that change the pod's network: nftables needs CAP_NET_ADMIN as root.
NETWORK_ACTIONS = ("delay", "partition")
REDIS_PORT = 6379


def container_name(benchmark: str, run: int, index: int) -> str:
    """container_name is unique per Benchmark, run and fault: a pod keeps its
    ephemeral containers for its whole life, so a name is never reused."""
    digest = hashlib.sha256(benchmark.encode()).hexdigest()[:8]
    return f"sluice-fault-{digest}-{run}-{index}"


def shard_container(pod: dict[str, Any]) -> dict[str, Any]:
    """shard_container is the pod's Redis container: the one named redis, else the first."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == "redis"), containers[0])


def _port(c: dict[str, Any]) -> int:
    for p in c.get("ports") or []:
        if p.get("name") in ("redis", "redis-client") or p.get("containerPort") == REDIS_PORT:
            return int(p["containerPort"])
    return REDIS_PORT


def _tls(c: dict[str, Any]) -> bool:
    """_tls: the Redis serves TLS on its port (builtin and redis-operator shards say so in their arguments)."""
    words = " ".join(list(c.get("command") or []) + list(c.get("args") or []))
    env = {e.get("name"): e.get("value") for e in c.get("env") or []}
    return "--tls-port" in words or env.get("TLS_MODE") == "true"


def build(cfg: Config, f: dict[str, Any], pod: dict[str, Any], name: str) -> dict[str, Any]:
    """build is the ephemeral container for fault f in pod: it gets the Redis
    container's password variable (the same Secret), and root with CAP_NET_ADMIN
    only for the faults that change the network."""
    target = shard_container(pod)
    action = f["action"]
    args = ["fault", action, "--port", str(_port(target)), "--duration", f"{int(f['duration'])}s"]
    if action == "delay":
        args += ["--delay", f"{int(f['latencyMs'])}ms", "--jitter", f"{int(f.get('jitterMs') or 0)}ms"]
    if action in ("fill", "delay") and _tls(target):
        args.append("--tls")
    security: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    if action in NETWORK_ACTIONS:
        security.update(runAsUser=0, runAsNonRoot=False, capabilities={"drop": ["ALL"], "add": ["NET_ADMIN"]})
    env = [e for e in target.get("env") or [] if e.get("name") == common.REDIS_PASSWORD_ENV]
    return {
        "name": name,
        "image": cfg.bench_image,
        "imagePullPolicy": cfg.image_pull_policy,
        "args": args,
        "env": env,
        "securityContext": security,
        "targetContainerName": target.get("name", "redis"),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
