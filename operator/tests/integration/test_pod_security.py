"""A namespace labelled pod-security.kubernetes.io/enforce=restricted runs
everything the operator creates: the apiserver admits the server, catalog and
builtin shard pods (and refuses a privileged stray pod, so enforcement is
really on); the operator creates the namespace's NetworkPolicies under its
least-privilege RBAC."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from .conftest import Operator, _no_forbidden, apply, drop_namespace, kc, make_namespace, wait_for
from .test_pools import pool


@pytest.fixture(scope="module")
def restricted_ns(sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ns = make_namespace("sit-psa")
    kc(
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    op = Operator(sa_kubeconfig, ns, tmp_path_factory.mktemp("op") / "operator.log", {})
    yield ns
    try:
        drop_namespace(ns)
    finally:
        op.stop()
    _no_forbidden(op)


def pods(ns: str, selector: str) -> list[dict]:
    return json.loads(kc("get", "pods", "-n", ns, "-l", selector, "-o", "json").stdout)["items"]


def test_restricted_namespace_runs_everything(restricted_ns: str) -> None:
    ns = restricted_ns
    # The apiserver enforces the level: a privileged pod is refused outright.
    stray = kc(
        "run",
        "stray",
        "-n",
        ns,
        "--image=sluice.dev/redis:dev",
        "--restart=Never",
        "--overrides",
        '{"spec":{"containers":[{"name":"stray","image":"sluice.dev/redis:dev",'
        '"securityContext":{"privileged":true}}]}}',
        check=False,
    )
    assert stray.returncode != 0 and "violates PodSecurity" in stray.stderr, stray.stderr

    apply(pool(ns, "psa", shards=1, replicas=2, placement={"nodeClass": "any"}))
    wanted = {
        "app.kubernetes.io/component=backend,sluice.dev/pool=psa": 2,
        "app.kubernetes.io/component=server": 2,
        "app.kubernetes.io/component=catalog": 1,
    }
    for selector, n in wanted.items():
        wait_for(f"{n} pods admitted for {selector}", lambda s=selector, n=n: len(pods(ns, s)) >= n, timeout=120)
    events = kc("get", "events", "-n", ns, "-o", "json").stdout
    assert "violates PodSecurity" not in events
    policies = json.loads(kc("get", "networkpolicies", "-n", ns, "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"] for p in policies} == {"sluice-backends", "sluice-server", "sluice-catalog"}
