"""Generated Pool specs: a builtin Pool the apiserver accepts is one whose shards the
operator can build.

Some of a Pool's fields pass through to Kubernetes objects: the volume size and class,
the image, the container's resources, the node selector. A value the Pool's CRD takes
and the StatefulSet, its pods or their claims do not leaves the Pool NotProvisionable
for a mistake `kubectl apply` could have named. Each case is a valid spec with one to
three fields replaced by a generated value, valid or a little off (seeded by
SLUICE_POOL_SPECS_SEED, else at random, and named in every failure); when the apiserver
accepts it, the last shard's StatefulSet and Services, the last pod that StatefulSet
makes and that pod's volume claims must pass a server-side dry run too. A refused spec
is refused with a message naming a spec field.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

from sluice_operator.builders import builtin
from sluice_operator.config import Config

from .conftest import dry_run, hold_generated, pick
from .test_names import statefulset_pod

SEED = int(os.environ.get("SLUICE_POOL_SPECS_SEED") or random.randrange(1 << 32))
CASES = 40


def quantity(rng: random.Random) -> Any:
    """quantity is a Kubernetes quantity as a user might write one, or a little off."""
    return pick(rng, "1Gi", "512Mi", "1.5Gi", "100m", "0.5", 2, "1e3", "1E", "+1Gi", "-1Gi", "1 Gi", "1gi", "Gi", "")


def label_key(rng: random.Random) -> str:
    return pick(rng, "disk", "sluice.dev/node-type", "a/b/c", "Disk_Type", "-x", "x" * 64, "example.com/", "")


def label_value(rng: random.Random) -> str:
    return pick(rng, "ssd", "", "a.b-c_D", "with space", "x" * 64, "-x", "ü")


def resources(rng: random.Random) -> dict[str, Any]:
    """resources are requests, limits or both, of standard, extended or misspelt resources."""
    out: dict[str, Any] = {}
    for which in rng.sample(["requests", "limits"], rng.randint(1, 2)):
        names = rng.sample(["cpu", "memory", "example.com/gpu", "CPU"], rng.randint(1, 2))
        out[which] = {name: quantity(rng) for name in names}
    return out


MUTATIONS: dict[str, Callable[[random.Random, dict[str, Any]], None]] = {
    "size": lambda rng, spec: spec.setdefault("storage", {}).update(size=quantity(rng)),
    "storageClassName": lambda rng, spec: spec.setdefault("storage", {}).update(
        storageClassName=pick(rng, "standard", "fast.ssd", "Fast", "with space", "a/b", "x" * 254, "")
    ),
    "image": lambda rng, spec: spec.update(
        image=pick(
            rng, "redis:7.2", "registry.local:5000/redis@sha256:" + "a" * 64, "redis 7", " redis", "Redis", "redis:"
        )
    ),
    "resources": lambda rng, spec: spec.update(resources=resources(rng)),
    "nodeSelector": lambda rng, spec: spec.setdefault("placement", {}).update(
        nodeSelector={label_key(rng): label_value(rng)}
    ),
    "topologyKey": lambda rng, spec: spec.setdefault("placement", {}).update(
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": label_key(rng), "whenUnsatisfiable": "ScheduleAnyway"}]
    ),
    "shape": lambda rng, spec: spec.update(shards=pick(rng, 1, 64), replicas=pick(rng, 1, 7)),
}


def cases() -> Iterator[tuple[str, dict[str, Any]]]:
    """cases are CASES generated specs (what names each in a failure), each a valid
    builtin Redis Pool with one to three fields replaced."""
    rng = random.Random(SEED)
    for i in range(CASES):
        spec: dict[str, Any] = {"backend": "redis", "provisioner": "builtin"}
        for field in sorted(rng.sample(sorted(MUTATIONS), rng.randint(1, 3))):
            MUTATIONS[field](rng, spec)
        yield f"seed {SEED} case {i}: {spec!r}", spec


def claims(sts: dict[str, Any], pod: dict[str, Any]) -> list[dict[str, Any]]:
    """claims are the PersistentVolumeClaims the StatefulSet controller makes for pod:
    each claim template, named <template>-<pod>."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": f"{c['metadata']['name']}-{pod['metadata']['name']}",
                "namespace": pod["metadata"]["namespace"],
                "labels": c["metadata"].get("labels", {}),
            },
            "spec": c["spec"],
        }
        for c in sts["spec"].get("volumeClaimTemplates", [])
    ]


def test_accepted_pool_specs_can_be_built(dry_ns: str) -> None:
    cfg = Config()

    def built(body: dict[str, Any]) -> str:
        last = int(body["spec"]["shards"]) - 1
        sts = builtin.statefulset(cfg, body, last)
        pod = statefulset_pod(sts, int(sts["spec"]["replicas"]) - 1)
        ok, err, _ = dry_run([sts, *builtin.services(cfg, body, last), pod, *claims(sts, pod)])
        return "" if ok else f"accepted, its shard {last}'s objects are not: {err.strip()}"

    hold_generated("Pool", dry_ns, cases(), built)
