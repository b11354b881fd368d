"""Generated Benchmark specs: a Benchmark the apiserver accepts is one whose run can start.

A Benchmark becomes a Job whose pods run sluice-bench with a command line the operator
builds from the spec, and names other objects: the Pools its shard faults hit, the
Benchmark its results are compared to, the Secrets its tokens come from. A spec that
passes `kubectl apply` and then fails at the Job, at sluice-bench's own checks, or at a
lookup by name, fails the run for a mistake apply could have named. Each case is a valid
spec with one to three parts replaced by a generated value on either side of a limit, or
a hostile string (seeded by SLUICE_BENCH_SPECS_SEED, else at random, and named in every
failure). It is applied with a server-side dry run; when accepted:

- the run's parameters and report ConfigMaps, its Job and every pod the Job controller
  makes from it pass a server-side dry run;
- the real sluice-bench takes the Job's command line (`run --check`: every check a run
  makes before its first request), with the pod's environment filled in;
- each Pool a shard fault names, the Benchmark compareTo names and each Secret the spec
  references could exist (a dry run of each), and a fault's pod selector is a selector
  the apiserver reads;
- a refused spec is refused with a message naming a spec field.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

from sluice_operator.builders import benchmark as bb
from sluice_operator.config import Config
from sluice_operator.handlers import faults

from ..support import BENCH, need_file
from .conftest import could_exist, dry_run, edge, hold_generated, kc, pick
from .test_names import hostile, job_pods

SEED = int(os.environ.get("SLUICE_BENCH_SPECS_SEED") or random.randrange(1 << 32))
CASES = 40  # each costs two kubectl calls and a sluice-bench run
PRESETS = ("point-to-point", "task-distribution", "flood", "packing", "fairness", "http-baseline", "notifications")
# What the kubelet puts in the variables the Job's arguments name ($(VAR)).
POD_ENV = {bb.INDEX_ENV: "0", bb.TOKEN_ENV: "token", bb.ADMIN_TOKEN_ENV: "admin", bb.POD_IP_ENV: "10.244.0.7"}


def name(rng: random.Random) -> str:
    """name is an object name as a user might write one, or a hostile string."""
    return pick(rng, "web", "spare", "b-1") if rng.random() < 0.5 else hostile(rng)


def role(rng: random.Random) -> dict[str, Any]:
    return {"processes": edge(rng, 0, 64), "workers": pick(rng, 0, 0, 1, 10, 1000, 1001)}


def custom_load(rng: random.Random, spec: dict[str, Any]) -> None:
    """custom_load is scenario custom with roles (any of them idle), size, queues and rate."""
    load: dict[str, Any] = {}
    for r in rng.sample(["producers", "consumers", "observers"], rng.randint(0, 3)):
        load[r] = role(rng)
    if rng.random() < 0.2:  # every role idle
        load.update({r: {"processes": pick(rng, 0, 1), "workers": 0} for r in ("producers", "consumers", "observers")})
    for field, value in (
        ("duration", lambda: edge(rng, 1, 86400)),
        ("messageSize", lambda: edge(rng, 1, 1048576)),
        ("queues", lambda: edge(rng, 1, 10000)),
        ("rate", lambda: pick(rng, 0, 0.5, 100, 1e300, -1)),
    ):
        if rng.random() < 0.4:
            load[field] = value()
    spec.update(scenario="custom", custom=load)


def fault(rng: random.Random) -> dict[str, Any]:
    """fault is one entry of spec.faults, shaped for its action and target or not."""
    action = pick(rng, "delete", "kill", "scale", "drain")
    target = pick(rng, "server", "shard", "catalog", "operator")
    if action == "scale" and rng.random() < 0.8:
        target = "server"
    f: dict[str, Any] = {"at": pick(rng, 0, 1.5, 30, 86400, 86401, -1), "action": action, "target": target}
    if target == "shard" or rng.random() < 0.1:
        f.update(pool=name(rng), shard=edge(rng, 0, 255))
    if action == "scale" or rng.random() < 0.1:
        f["replicas"] = edge(rng, 0, 64)
    if rng.random() < 0.3:
        f["name"] = pick(rng, "kill the master", "x" * 63, "x" * 64, "")
    return f


def secret_ref(rng: random.Random) -> dict[str, str]:
    return {"name": name(rng), "key": pick(rng, "token", "tok.en", "..", "a/b")}


def target(rng: random.Random) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if rng.random() < 0.5:
        t["url"] = pick(
            rng, "http://zaqar.example:8888", "https://h.example/", "http://h:x/", "http://[::1", "http://", "ftp://h"
        )
    if rng.random() < 0.5:
        t["project"] = pick(rng, "tenant-a", "a b", " lead", "x" * 256, "x" * 257, "é")
    if rng.random() < 0.4:
        t["tokenSecretRef"] = secret_ref(rng)
    return t


def move(rng: random.Random) -> dict[str, Any]:
    m: dict[str, Any] = {"pool": pick(rng, "spare-0", "web-1")}
    if rng.random() < 0.6:
        # Around the presets' 10 s of load and custom's default 60 s, or the field's limits.
        m["afterSeconds"] = pick(rng, 9, 10, 11, 59, 60, edge(rng, 0, 86400))
    if rng.random() < 0.4:
        m["timeoutSeconds"] = edge(rng, 1, 3600)
    if rng.random() < 0.3:
        m["adminTokenSecretRef"] = secret_ref(rng)
    return m


MUTATIONS: dict[str, Callable[[random.Random, dict[str, Any]], None]] = {
    "scenario": lambda rng, spec: spec.update(scenario=pick(rng, *PRESETS, "Flood")),
    "custom": custom_load,
    "duration": lambda rng, spec: spec.update(duration=edge(rng, 1, 86400)),
    "parallelism": lambda rng, spec: spec.update(parallelism=edge(rng, 1, 64)),
    "deadline": lambda rng, spec: spec.update(activeDeadlineSeconds=edge(rng, 30, 172800)),
    "image": lambda rng, spec: spec.update(
        image=pick(rng, "sluice.dev/sluice-bench:dev", "registry.local:5000/bench@sha256:" + "a" * 64, " bench", "")
    ),
    "target": lambda rng, spec: spec.update(target=target(rng)),
    "pool": lambda rng, spec: spec.update(pool=name(rng)),
    "move": lambda rng, spec: spec.update(move=move(rng)),
    "faults": lambda rng, spec: spec.update(faults=[fault(rng) for _ in range(pick(rng, 1, 1, 2, 3))]),
    "thresholds": lambda rng, spec: spec.update(
        thresholds={
            k: pick(rng, 0, 1, 0.5, 1e9, -1)
            for k in rng.sample(["minRequestsPerSecond", "maxP99Ms", "maxLost", "maxUnavailableSeconds"], 2)
        }
    ),
    "compareTo": lambda rng, spec: spec.update(compareTo=name(rng)),
    "placement": lambda rng, spec: spec.update(
        placement={
            "nodeClass": pick(rng, "metal", "virtual", "any"),
            "policy": pick(rng, "required", "preferred"),
            "tolerations": pick(rng, [], [{"operator": "Exists"}], [{"key": "k", "operator": "Equal", "value": "v"}]),
        }
    ),
}


def cases() -> Iterator[tuple[str, dict[str, Any]]]:
    """cases are CASES generated specs, each a valid one with one to three parts replaced
    (a faults-only case first, so the fault checks always run)."""
    rng = random.Random(SEED)
    for i in range(CASES):
        spec: dict[str, Any] = {"scenario": pick(rng, "point-to-point", "task-distribution")}
        parts = ["faults"] if i == 0 else rng.sample(sorted(MUTATIONS), rng.randint(1, 3))
        # The scenario first: custom and the rest shape what they add to it.
        for part in sorted(parts, key=lambda p: (p not in ("scenario", "custom"), p)):
            MUTATIONS[part](rng, spec)
        if i == 0:  # a well-formed shard fault, so the Pool it names is always looked at
            spec["faults"][0] = {"at": 1, "action": "kill", "target": "shard", "pool": name(rng), "shard": 0}
        yield f"seed {SEED} case {i}: {spec!r}", spec


def named(ns: str, spec: dict[str, Any]) -> str:
    """named is what the apiserver says against each object the spec names: the Pools of
    its shard faults, the Benchmark of compareTo, the Secrets of its tokens."""
    target, move = spec.get("target") or {}, spec.get("move") or {}
    refs = [r for r in (target.get("tokenSecretRef"), move.get("adminTokenSecretRef")) if r]
    return could_exist(
        ns,
        pools=[f["pool"] for f in spec.get("faults") or [] if f["target"] == "shard"],
        benchmarks=[spec["compareTo"]] if spec.get("compareTo") else [],
        secrets=[(r["name"], r["key"]) for r in refs],
    )


def bench_refuses(container: dict[str, Any]) -> str:
    """bench_refuses is what the real sluice-bench says of the container's command line,
    with the $(VAR)s the kubelet fills in ("" when it would start the run)."""
    args = [re.sub(r"\$\((\w+)\)", lambda m: POD_ENV[m.group(1)], a) for a in container["args"]]
    env = {**os.environ, **POD_ENV}
    out = subprocess.run([str(BENCH), *args, "--check"], capture_output=True, text=True, timeout=30, env=env)
    return "" if out.returncode == 0 else f"exit {out.returncode}: {out.stderr.strip()[-400:]}"


def test_accepted_benchmark_specs_can_run(dry_ns: str) -> None:
    need_file(BENCH, "make build-bench")
    cfg = Config()
    start_at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def runnable(body: dict[str, Any]) -> str:
        spec = body["spec"]
        if problems := named(dry_ns, spec):
            return f"accepted, but {problems}"
        job = bb.job(cfg, body, 1, start_at, 5)
        built = [
            bb.parameters(cfg, body, 1, start_at, cfg.bench_image),
            bb.report(cfg, body, 1, {"data": {"report.html": "<html></html>"}}),
            job,
            *job_pods(job),
        ]
        ok, err, _ = dry_run(built)
        if not ok:
            return f"accepted, what the operator builds for its run is not: {err.strip()}"
        for f in spec.get("faults") or []:
            sel = kc("get", "pods", "-n", dry_ns, "-l", faults.target_selector(f), "-o", "name", check=False)
            if sel.returncode != 0:
                return f"accepted, fault {f} selects pods with {faults.target_selector(f)!r}: {sel.stderr.strip()}"
        if why := bench_refuses(job["spec"]["template"]["spec"]["containers"][0]):
            return f"accepted, sluice-bench refuses the run's command line: {why}"
        return ""

    hold_generated("Benchmark", dry_ns, cases(), runnable)
