"""Generated names: a name the apiserver accepts is one the operator can build from.

Kubernetes accepts any DNS subdomain of up to 253 characters as a custom resource's
name, while what the operator makes from it has tighter limits: a label value holds 63
characters, a queue name 64. A name that passes `kubectl apply` and then fails inside the
operator leaves the object stuck with the reason only in the operator's log, so each
name must be refused at apply (with the CRD's message) or work.

For each generated name (seeded by SLUICE_NAMES_SEED, else at random, and named in every
failure), a Benchmark, a Queue and a Pool are applied with a server-side dry run. For an
accepted Benchmark, the objects the operator builds for a run (the parameters and report
ConfigMaps, the Job, and each pod the Job controller makes from it, named and labelled as
that controller does) must pass a server-side dry run too, and its queues must be
accepted by a real sluice-server; for an accepted Queue, its queue name must be; for an
accepted Pool, its last shard's builtin StatefulSet and Services, and the last pod that
StatefulSet makes, must pass the dry run. Hostile strings in Secret references and
projects are held to the same rule.
"""

from __future__ import annotations

import os
import pathlib
import random
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sluice_operator.builders import benchmark as bb
from sluice_operator.builders import builtin
from sluice_operator.config import Config
from sluice_operator.handlers import queue as queue_handler
from sluice_operator.serverapi import ServerAPI, ServerError

from ..support import QUICK_STOP, SERVER, Processes, free_port, need_file, wait_port
from .conftest import admit, could_exist, dry_run

SEED = int(os.environ.get("SLUICE_NAMES_SEED") or random.randrange(1 << 32))
NAMES = 24  # per test; each costs about four kubectl calls
# Lengths where a limit lies (Pool names 40, Job names 52, label values 63, queue names
# 64, names 253),
# so every run crosses each one; the rest are drawn at random.
EDGES = (1, 39, 40, 41, 51, 52, 53, 62, 63, 64, 65, 253)
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def subdomain(rng: random.Random, length: int, plain: bool) -> str:
    """subdomain is a random DNS-1123 subdomain of exactly length characters (what
    Kubernetes accepts as a custom resource's name): plain, a label that starts with a
    letter (what most users write), or with digits first, dots and dashes."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    alnum = letters + "0123456789"
    inner = alnum + "-" * 4 + ("" if plain else "." * 2)
    for _ in range(100):
        chars = [rng.choice(inner) for _ in range(length)]
        chars[0], chars[-1] = rng.choice(letters if plain else alnum), rng.choice(alnum)
        name = "".join(chars)
        if SUBDOMAIN.match(name):
            return name
    return "".join(rng.choice(letters) for _ in range(length))


def names(salt: int) -> list[str]:
    """names are NAMES generated names: plain ones of each EDGES length, so every run has
    names on both sides of each limit, a short one with a dot, then names of random
    lengths and styles."""
    rng = random.Random(SEED * 1009 + salt)
    edges = [subdomain(rng, n, True) for n in EDGES] + [f"{subdomain(rng, 8, True)}.{subdomain(rng, 8, False)}"]
    return edges + [subdomain(rng, rng.randint(1, 253), rng.random() < 0.5) for _ in range(NAMES - len(edges))]


def job_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """job_pods are the pods the Job controller makes for an Indexed Job: named
    <job>-<index>-<5 random>, with the job-name, controller-uid and completion-index
    labels and annotation, and hostname <job>-<index>."""
    name, spec = job["metadata"]["name"], job["spec"]
    template, uid = spec["template"], str(uuid.uuid4())
    pods = []
    for i in range(int(spec["completions"])):
        labels = {
            **template["metadata"].get("labels", {}),
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
        }
        index = {"batch.kubernetes.io/job-completion-index": str(i)}
        annotations = {**template["metadata"].get("annotations", {}), **index}
        labels.update(index)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}-{uuid.uuid4().hex[:5]}",
                    "namespace": job["metadata"]["namespace"],
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": {**template["spec"], "hostname": f"{name}-{i}"},
            }
        )
    return pods


def statefulset_pod(sts: dict[str, Any], ordinal: int) -> dict[str, Any]:
    """statefulset_pod is pod `ordinal` as the StatefulSet controller makes it: named
    <set>-<ordinal>, labelled with its name, index and the revision (<set>-<10 characters>),
    host name its own name under the governing Service, each claim template mounted as
    its claim <template>-<pod>."""
    name, spec = sts["metadata"]["name"], sts["spec"]
    template, pod = spec["template"], f"{name}-{ordinal}"
    claims = [
        {"name": c["metadata"]["name"], "persistentVolumeClaim": {"claimName": f"{c['metadata']['name']}-{pod}"}}
        for c in spec.get("volumeClaimTemplates", [])
    ]
    labels = {
        **template["metadata"].get("labels", {}),
        "controller-revision-hash": f"{name}-{uuid.uuid4().hex[:10]}",
        "statefulset.kubernetes.io/pod-name": pod,
        "apps.kubernetes.io/pod-index": str(ordinal),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": sts["metadata"]["namespace"], "labels": labels},
        "spec": {
            **template["spec"],
            "hostname": pod,
            "subdomain": spec["serviceName"],
            "volumes": [*template["spec"].get("volumes", []), *claims],
        },
    }


@pytest.fixture(scope="module")
def zaqar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerAPI]:
    """zaqar is the operator's own client for a real sluice-server (memory store): the
    judge of queue names and projects, sent as the operator sends them."""
    server = need_file(SERVER, "make build-server")
    tmp: pathlib.Path = tmp_path_factory.mktemp("names")
    procs = Processes()
    port = free_port()
    try:
        procs.start([server, "--listen", f"127.0.0.1:{port}", "--store", "memory", *QUICK_STOP], log=tmp / "server.log")
        if not wait_port(port, 30):
            raise RuntimeError(f"sluice-server did not start (see {tmp / 'server.log'})")
        api = ServerAPI(f"http://127.0.0.1:{port}")
        yield api
        api.close()
    finally:
        procs.stop()


def queue_refused(api: ServerAPI, project: str, name: str) -> str | None:
    """queue_refused is the server's answer to creating queue name, or None when it was made."""
    try:
        api.put_queue(project, name, {})
    except ServerError as exc:
        return str(exc)
    return None


def test_benchmark_names(dry_ns: str, zaqar: ServerAPI) -> None:
    cfg = Config()
    rng = random.Random(SEED)
    tally: Counter[bool] = Counter()
    for name in names(1):
        spec = {"scenario": "flood", "parallelism": rng.randint(1, 3), "pool": "web"}
        body = admit(
            "Benchmark", dry_ns, name, spec, "at most 63 lowercase letters, digits and", f"seed {SEED}: {name!r}"
        )
        tally[body is not None] += 1
        if body is None:
            continue
        run = rng.choice([1, 7, 123456])
        job = bb.job(cfg, body, run, "2026-01-01T00:00:00Z", 5)
        built = [
            bb.parameters(cfg, body, run, "2026-01-01T00:00:00Z", cfg.bench_image),
            bb.report(cfg, body, run, {"data": {"report.html": "<html></html>"}}),
            job,
            *job_pods(job),
        ]
        ok, err, _ = dry_run(built)
        assert ok, f"seed {SEED}: Benchmark {name!r} was accepted, what the operator builds for run {run} is not: {err}"
        for q in bb.queue_names(body, run):
            answer = queue_refused(zaqar, bb.project(body), q)
            assert answer is None, f"seed {SEED}: Benchmark {name!r} run {run}: queue {q!r} refused: {answer}"
    # Both sides of the limit were tried (EDGES holds names of 63 and 64 characters).
    assert tally[True] and tally[False], tally


def test_queue_names(dry_ns: str, zaqar: ServerAPI) -> None:
    tally: Counter[bool] = Counter()
    for name in names(2):
        body = admit(
            "Queue", dry_ns, name, {"pool": "web"}, "a queue name has at most 64 characters", f"seed {SEED}: {name!r}"
        )
        tally[body is not None] += 1
        if body is None:
            continue
        project, qname = queue_handler.identity(body)
        answer = queue_refused(zaqar, project, qname)
        assert answer is None, f"seed {SEED}: Queue {name!r} was accepted, its queue name is refused: {answer}"
    assert tally[True] and tally[False], tally


def test_pool_names(dry_ns: str) -> None:
    cfg = Config()
    rng = random.Random(SEED + 3)
    tally: Counter[bool] = Counter()
    for name in names(3):
        backend = rng.choice(["redis", "mongodb"])
        spec: dict[str, Any] = {
            "backend": backend,
            "provisioner": "builtin",
            "shards": rng.choice([1, 64]),
            "replicas": rng.choice([1, 7]),
        }
        if backend == "mongodb":
            spec["image"] = "mongo:7"
        body = admit("Pool", dry_ns, name, spec, "metadata.name", f"seed {SEED}: {name!r}")
        tally[body is not None] += 1
        if body is None:
            continue
        last = int(body["spec"]["shards"]) - 1
        sts = builtin.statefulset(cfg, body, last)
        built = [sts, *builtin.services(cfg, body, last), statefulset_pod(sts, int(sts["spec"]["replicas"]) - 1)]
        ok, err, _ = dry_run(built)
        assert ok, f"seed {SEED}: Pool {name!r} ({spec}) was accepted, its shard {last}'s objects are not: {err}"
    assert tally[True] and tally[False], tally


def hostile(rng: random.Random) -> str:
    """hostile is a string a user might put where a Kubernetes name or key goes: a valid
    name, or one with capitals, underscores, spaces, slashes or other punctuation."""
    if rng.random() < 0.4:
        return subdomain(rng, rng.randint(1, 70), rng.random() < 0.5)
    return "".join(rng.choice("abcXYZ019-._ /:@") for _ in range(rng.randint(1, 30)))


def test_benchmark_secret_refs(dry_ns: str) -> None:
    """A Secret reference the apiserver accepts in a Benchmark is one the run's Job can
    carry: its name a Secret's name, its key a Secret's key."""
    cfg = Config()
    rng = random.Random(SEED + 4)
    tally: Counter[bool] = Counter()
    for i in range(NAMES):
        # The first is valid and the second not, so both sides are always tried.
        ref = {"name": hostile(rng), "key": hostile(rng)}
        if i == 0:
            ref = {"name": subdomain(rng, 20, True), "key": "token"}
        elif i == 1:
            ref["name"] = "Not_A_Secret"
        elif i == 2:
            ref = {"name": subdomain(rng, 20, True), "key": rng.choice([".", "..", "..token"])}
        spec = {"scenario": "flood", "target": {"tokenSecretRef": ref}}
        body = admit("Benchmark", dry_ns, f"refs-{i}", spec, "spec.target.tokenSecretRef", f"seed {SEED}: {ref}")
        tally[body is not None] += 1
        if body is None:
            continue
        ok, err, _ = dry_run([bb.job(cfg, body, 1, "2026-01-01T00:00:00Z", 5)])
        assert ok, f"seed {SEED}: tokenSecretRef {ref} was accepted, the run's Job is not: {err}"
    assert tally[True] and tally[False], tally


def test_queue_projects(dry_ns: str, zaqar: ServerAPI) -> None:
    """A project the apiserver accepts in a Queue is one the operator can send the server
    as X-Project-ID, and the server takes: no control characters, at most 256 characters."""
    rng = random.Random(SEED + 5)
    tally: Counter[bool] = Counter()
    chars = "ab Z9-_.:/@é€\t\n\r\x00\x7f"
    for i in range(NAMES):
        project = "".join(rng.choice(chars) for _ in range(rng.choice([1, 2, 20, 256, 257])))
        # The first is valid and the second not, so both sides are always tried.
        project = {0: f"p-{i}-{rng.randrange(1000)}", 1: "line\nbreak"}.get(i, project)
        spec = {"pool": "web", "project": project}
        body = admit("Queue", dry_ns, f"proj-{i}", spec, "spec.project", f"seed {SEED}: {project!r}")
        tally[body is not None] += 1
        if body is None:
            continue
        answer = queue_refused(zaqar, *queue_handler.identity(body))
        assert answer is None, f"seed {SEED}: project {project!r} was accepted, the server refuses it: {answer}"
    assert tally[True] and tally[False], tally


def test_benchmark_pools(dry_ns: str) -> None:
    """A Benchmark's pool the apiserver accepts (without target.url) names a Pool that
    could exist: the operator looks it up by that name and makes it the flavor."""
    rng = random.Random(SEED + 6)
    tally: Counter[bool] = Counter()
    generated = names(6)
    for i in range(NAMES):
        # The first is valid and the second not, so both sides are always tried.
        pool = {0: "web", 1: "../secrets/x"}.get(i) or (hostile(rng) if rng.random() < 0.5 else generated[i])
        body = admit(
            "Benchmark", dry_ns, f"pool-{i}", {"scenario": "flood", "pool": pool}, "spec", f"seed {SEED}: {pool!r}"
        )
        tally[body is not None] += 1
        if body is None:
            continue
        err = could_exist(dry_ns, pools=[pool])
        assert not err, f"seed {SEED}: Benchmark pool {pool!r} was accepted, no Pool can have that name: {err}"
    assert tally[True] and tally[False], tally
