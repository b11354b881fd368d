"""The control-plane-only cluster (real apiserver, controller-manager and
scheduler, kwok nodes): CRDs installed from crds/, the operator started as a
process under its own least-privilege ServiceAccount (operator/deploy/rbac.yaml),
watching namespaces of its own."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import yaml

from ..support import ROOT, free_port, unavailable

KUBECONFIG = pathlib.Path(os.environ.get("KUBECONFIG") or ROOT / "build/kube/kubeconfig")
KUBECTL = str(ROOT / "build/bin/kubectl") if (ROOT / "build/bin/kubectl").exists() else shutil.which("kubectl")


def kc(
    *args: str, stdin: str | None = None, check: bool = True, kubeconfig: pathlib.Path = KUBECONFIG
) -> subprocess.CompletedProcess:
    """kc runs kubectl against the test cluster."""
    assert KUBECTL, "kubectl not found"
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), "--request-timeout=30s", *args],
        input=stdin,
        text=True,
        capture_output=True,
        check=check,
        timeout=90,
    )


def get(kind: str, ns: str, name: str) -> dict[str, Any] | None:
    out = kc("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def apply(obj: dict[str, Any] | str, check: bool = True) -> subprocess.CompletedProcess:
    text = obj if isinstance(obj, str) else yaml.safe_dump(obj)
    return kc("apply", "-f", "-", stdin=text, check=check)


def dry_run(docs: list[dict[str, Any]]) -> tuple[bool, str, list[dict[str, Any]]]:
    """dry_run applies docs with a server-side dry run: (all accepted, stderr, objects as
    the apiserver would store them, defaults applied)."""
    # JSON: in YAML, kubectl would read a name such as "n" or "y" as a boolean.
    doc = {"apiVersion": "v1", "kind": "List", "items": docs}
    out = kc("apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(doc), check=False)
    if out.returncode != 0:
        return False, out.stderr, []
    got = json.loads(out.stdout)
    return True, "", got.get("items", [got])


def custom(kind: str, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """custom is a sluice custom resource of kind, named name in ns."""
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pick(rng: random.Random, *choices: Any) -> Any:
    """pick is one of choices, for the generated tests."""
    return rng.choice(choices)


def edge(rng: random.Random, low: int, high: int) -> int:
    """edge is a number on either side of [low, high]'s ends, inside it, or 0 or -1, for
    the generated tests."""
    return pick(rng, low - 1, low, low + 1, high - 1, high, high + 1, rng.randint(low, high), -1, 0)


def could_exist(
    ns: str, pools: Iterable[str] = (), benchmarks: Iterable[str] = (), secrets: Iterable[tuple[str, str]] = ()
) -> str:
    """could_exist is what the apiserver says, in one server-side dry run, against a Pool
    and a Benchmark of each name and a Secret of each (name, key) a spec refers to ("" when
    all could exist): what the operator looks up by those names could be there."""
    docs = [custom("Pool", ns, p, {"backend": "redis", "provisioner": "builtin"}) for p in pools]
    docs += [custom("Benchmark", ns, b, {"scenario": "flood"}) for b in benchmarks]
    for name, key in secrets:
        meta = {"name": name, "namespace": ns}
        docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {key: "x"}})
    if not docs:
        return ""
    ok, err, _ = dry_run(docs)
    return "" if ok else err.strip()


def admit(kind: str, ns: str, name: str, spec: dict[str, Any], refusal: str, what: str) -> dict[str, Any] | None:
    """admit applies a custom resource with a server-side dry run: the object as the
    apiserver would store it (given a uid), or None when refused, with refusal in the
    apiserver's message (what names the case, and its seed, in a failure)."""
    ok, err, got = dry_run([custom(kind, ns, name, spec)])
    if not ok:
        assert refusal in err, f"{kind} {what}: {err}"
        return None
    return {**got[0], "metadata": {**got[0]["metadata"], "uid": str(uuid.uuid4())}}


def hold_generated(
    kind: str, ns: str, cases: Iterable[tuple[str, dict[str, Any]]], check: Callable[[dict[str, Any]], str]
) -> None:
    """hold_generated applies each generated case (what, spec) as a `kind` with a
    server-side dry run. A refused spec must be refused naming a spec field; for an
    accepted one, check(object) says what is wrong ("" when nothing). Every failure is
    reported at once, and the generator must have produced both accepted and refused
    cases (so a test cannot pass by refusing everything)."""
    tally: Counter[bool] = Counter()
    failures = []
    for i, (what, spec) in enumerate(cases):
        body = admit(kind, ns, f"gen-{i}", spec, "spec.", what)
        tally[body is not None] += 1
        if body is not None and (why := check(body)):
            failures.append(f"{what}: {why}")
    assert not failures, "\n".join(failures)
    assert tally[True] and tally[False], tally


@pytest.fixture(scope="module")
def dry_ns(cluster: None) -> Iterator[str]:
    """dry_ns is a namespace for server-side dry runs (nothing in it runs)."""
    ns = make_namespace("dry")
    try:
        yield ns
    finally:
        drop_namespace(ns)


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60, interval: float = 0.5) -> Any:
    """wait_for polls fn until it returns a truthy value; bounded in time."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def status(obj: dict[str, Any] | None) -> dict[str, Any]:
    """status is an object's status; {} for no object, or one the operator has not
    written a status for yet (a poll right after apply sees that)."""
    return (obj or {}).get("status") or {}


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for c in status(obj).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return {}


def cluster_reachable() -> bool:
    if not KUBECTL or not KUBECONFIG.exists():
        return False
    return kc("get", "--raw", "/readyz", check=False).returncode == 0


@pytest.fixture(scope="session")
def cluster() -> Iterator[None]:
    if not cluster_reachable():
        unavailable(f"no control plane at {KUBECONFIG} (run make controlplane-up)")
    kc("apply", "-f", str(ROOT / "crds"))
    for crd in ("pools", "queues", "benchmarks"):
        kc("wait", "--for=condition=Established", f"crd/{crd}.sluice.dev", "--timeout=60s")
    kc("create", "namespace", RBAC_NS)
    kc("apply", "-f", "-", stdin=yaml.safe_dump_all(rbac_docs()))
    yield
    kc("delete", "clusterrolebinding,clusterrole", RBAC_NAME, "--ignore-not-found", check=False)
    kc("delete", "namespace", RBAC_NS, "--wait=false", check=False)


# The operator's own RBAC manifest under names of this run's own: nothing else on
# the cluster (a chart release, another run of the suite) shares them.
RBAC_NAME = f"sluice-operator-it-{uuid.uuid4().hex[:6]}"
RBAC_NS = RBAC_NAME


def rbac_docs() -> list[dict[str, Any]]:
    """rbac_docs are operator/deploy/rbac.yaml's ServiceAccount, ClusterRole and binding,
    renamed to RBAC_NAME (the ServiceAccount in namespace RBAC_NS); the rules are unchanged."""
    docs = [d for d in yaml.safe_load_all((ROOT / "operator/deploy/rbac.yaml").read_text()) if d]
    for d in docs:
        d["metadata"]["name"] = RBAC_NAME
        if d["kind"] == "ServiceAccount":
            d["metadata"]["namespace"] = RBAC_NS
        if d["kind"] == "ClusterRoleBinding":
            d["roleRef"]["name"] = RBAC_NAME
            d["subjects"] = [{"kind": "ServiceAccount", "name": RBAC_NAME, "namespace": RBAC_NS}]
    assert sorted(d["kind"] for d in docs) == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"], docs
    return docs


@pytest.fixture(scope="session")
def sa_kubeconfig(cluster: None, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A kubeconfig that authenticates as the operator's ServiceAccount, nothing more."""
    token = kc("create", "token", RBAC_NAME, "-n", RBAC_NS, "--duration=2h").stdout.strip()
    raw = json.loads(kc("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cl = raw["clusters"][0]
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "it", "cluster": cl["cluster"]}],
        "users": [{"name": "sluice-operator", "user": {"token": token}}],
        "contexts": [{"name": "it", "context": {"cluster": "it", "user": "sluice-operator"}}],
        "current-context": "it",
    }
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    # The ServiceAccount must not be an admin in disguise.
    assert kc("auth", "can-i", "create", "clusterroles", kubeconfig=path, check=False).stdout.strip() == "no"
    return path


class Operator:
    """A sluice-operator process watching one namespace, with its log kept for inspection."""

    def __init__(self, kubeconfig: pathlib.Path, ns: str, log: pathlib.Path, env: dict[str, str]):
        self.ns, self.log = ns, log
        self.metrics_port, self.liveness_port = free_port(), free_port()
        full_env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "SLUICE_OPERATOR_WATCH_NAMESPACES": ns,
            "SLUICE_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "SLUICE_OPERATOR_LIVENESS_PORT": str(self.liveness_port),
            "SLUICE_OPERATOR_POOL_INTERVAL": "2",
            "SLUICE_OPERATOR_QUEUE_INTERVAL": "2",
            "SLUICE_OPERATOR_DELETE_RETRIES": "1",
            "SLUICE_OPERATOR_PROBE_TIMEOUT_MS": "300",
            # No server pod runs without a kubelet: point the client at a closed port.
            "SLUICE_OPERATOR_SERVER_URL_TEMPLATE": f"http://127.0.0.1:{free_port()}",
            **env,
        }
        self.env = full_env
        self.fh = log.open("w")
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sluice_operator.cli"], env=self.env, stdout=self.fh, stderr=subprocess.STDOUT
        )

    def kill(self) -> None:
        """kill stops the operator without any chance to clean up (SIGKILL)."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        stop_process(self.proc)
        self.fh.close()


def stop_process(proc: subprocess.Popen) -> None:
    """stop_process asks a host process to exit (SIGTERM), then kills it after 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def make_namespace(prefix: str) -> str:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", ns)
    return ns


def drop_namespace(ns: str) -> None:
    """drop_namespace deletes a test namespace while its operator still runs, and
    insists it completes: finalizers must never make a namespace hang."""
    # Kopf serves a namespaced watch only while the namespace is not terminating,
    # so a namespace-scoped operator releases its finalizers first (a cluster-wide
    # one, as deployed, also does during namespace deletion).
    kc("delete", "queues,pools", "--all", "-n", ns, "--timeout=80s", check=False)
    kc("delete", "namespace", ns, "--wait=false", check=False)

    def gone() -> bool:
        # Simulated nodes honour a pod's whole termination grace period (30 s) before
        # confirming its deletion, and the namespace waits for every pod: confirm them
        # at once, as a kubelet whose containers have exited would.
        kc("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0", "--wait=false", check=False)
        return kc("get", "namespace", ns, check=False).returncode != 0

    wait_for(f"namespace {ns} deleted", gone, timeout=180, interval=2)


@contextlib.contextmanager
def operator_namespace(
    kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory, prefix: str, env: dict[str, str]
) -> Iterator[tuple[str, Operator]]:
    """operator_namespace is a new namespace and an operator (under its own RBAC, with env)
    watching it; afterwards the namespace is dropped, the operator stopped, and its log
    checked for RBAC denials."""
    ns = make_namespace(prefix)
    op = Operator(kubeconfig, ns, tmp_path_factory.mktemp("op") / "operator.log", env)
    try:
        yield ns, op
    finally:
        try:
            drop_namespace(ns)
        finally:
            op.stop()
    _no_forbidden(op)


@pytest.fixture(scope="session")
def metal_ns(sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Operator]]:
    with operator_namespace(sa_kubeconfig, tmp_path_factory, "sit-metal", {}) as (ns, op):
        yield ns, op


@pytest.fixture(scope="session")
def nometal_ns(
    sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Operator, str]]:
    """An operator whose metal label key no node carries: the cluster has no metal nodes for it."""
    key = f"it.sluice.dev/class-{uuid.uuid4().hex[:6]}"
    env = {"SLUICE_OPERATOR_METAL_LABEL_KEY": key}
    with operator_namespace(sa_kubeconfig, tmp_path_factory, "sit-nometal", env) as (ns, op):
        yield ns, op, key


# 403s that are not RBAC denials: creating in a namespace that is being deleted,
# or an object whose CustomResourceDefinition is being deleted.
NOT_RBAC = ("being terminated", "NamespaceTerminating", "custom resource definition is terminating")
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.M)


def rbac_denials(log: str) -> list[str]:
    """rbac_denials are the operator's log records (a message with its traceback and
    response body) that report a 403 or a forbidden request, but for the NOT_RBAC ones."""
    starts = sorted({0, *(m.start() for m in RECORD.finditer(log))})
    records = [log[a:b] for a, b in zip(starts, [*starts[1:], len(log)], strict=True)]
    return [
        r.strip()
        for r in records
        if ("(403)" in r or '"code":403' in r or " 403 " in r or "forbidden" in r.lower())
        and not any(x in r for x in NOT_RBAC)
    ]


def _no_forbidden(op: Operator) -> None:
    bad = rbac_denials(op.text())
    assert not bad, "operator hit RBAC denials:\n" + "\n".join(bad[:20])


def drop_tls_namespace(ns: str, op: Operator) -> None:
    """drop_tls_namespace deletes a namespace the operator ran TLS in, stops the operator and
    checks its log: no RBAC denial, and no key or certificate material."""
    try:
        drop_namespace(ns)
    finally:
        op.stop()
    _no_forbidden(op)
    assert "BEGIN" not in op.text(), "key or certificate material in the operator's log"
