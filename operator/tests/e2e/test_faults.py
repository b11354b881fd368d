"""Faults under load, with real pods: Benchmarks whose spec.faults kill a
sluice-server pod or a Redis shard's pod mid-run, and a `helm upgrade` that
changes the server's image tag while a Benchmark runs. What a client sees is
asserted from the Benchmark's own results: nothing acknowledged is lost, a
killed server costs only the requests in flight on it, a killed shard answers
503 (never 500) until it is back, and the rolling update fails no request."""

from __future__ import annotations

import gzip
import os
import pathlib
import subprocess
import threading
import time
from typing import Any

import pytest

from ..integration.conftest import apply, condition, get, kc, wait_for
from .test_benchmarks import benchmark, run
from .test_pools import pool, ready

ROOT = pathlib.Path(__file__).resolve().parents[3]
RELEASE, RELEASE_NS = "sluice", "sluice-system"
# task-distribution's workers: 2x25 producers and 2x25 consumers, each with
# at most one request in flight.
WORKERS = 100


@pytest.fixture(scope="module")
def fault_pool(ns: str) -> str:
    apply(pool(ns, "faults", 2))
    wait_for("Pool faults Ready", lambda: ready("pool", ns, "faults"), timeout=300)
    return ns


def reported(ns: str, name: str) -> dict[str, Any]:
    """reported waits for the run's report, which measures each fault into status.faults."""
    b = wait_for(
        f"{name} report",
        lambda: (o := get("benchmark", ns, name)) and condition(o, "ReportReady").get("status") == "True" and o,
        timeout=300,
    )
    return b["status"]


def server_warnings(ns: str) -> list[str]:
    """server_warnings are the lines other than INFO (and the drains) that the
    namespace's sluice-server pods wrote, rotated files included: the kubelet
    rotates a container's log at 10 MiB, a few seconds of access log under
    load, and `kubectl logs` reads only the current file. The local
    cluster's node is this machine, so its pod log directory is read
    directly; elsewhere, what `kubectl logs` has."""

    def wanted(line: str) -> bool:
        return '"level":"INFO"' not in line or any(m in line for m in ('"msg":"draining"', '"msg":"listener closed"'))

    out: list[str] = []
    for path in sorted(pathlib.Path("/var/log/pods").glob(f"{ns}_sluice-server-*/*/*")):
        try:
            with (gzip.open if path.suffix == ".gz" else open)(path, "rt", errors="replace") as f:
                out += [f"{path.parent.parent.name.split('_')[1]} {line.rstrip()}" for line in f if wanted(line)]
        except OSError:
            continue
    if out:
        return out
    logs = kc("logs", "-l", "app.kubernetes.io/component=server", "-n", ns, "--tail=-1", "--prefix", check=False)
    return [line for line in logs.stdout.splitlines() if wanted(line)]


def diagnostics(ns: str, name: str) -> str:
    """diagnostics are what explains an unexpected failure of run `name`,
    printed in full (an assertion message is cut short) and returned as a
    pointer to them: from the bench's log, the requests that got no status
    (it writes the first ones in full) and the error counts by reason; the
    servers' warnings and drains; the pods and the namespace's events,
    which show a pod restarted or replaced during the run."""
    kinds = ("sluice-bench:", "http_", "eof", "connection_", "timeout", "transport")
    bench = kc("logs", f"job/{name}-r1", "-n", ns, "--tail=-1", check=False)
    # The summary's encoded results are one long line: not an explanation.
    noted = [line for line in bench.stdout.splitlines() if any(k in line for k in kinds) and len(line) < 400][-40:]
    warnings = server_warnings(ns)
    pods = kc("get", "pods", "-n", ns, "-o", "wide", check=False)
    events = kc("get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False)
    text = (
        f"\n--- diagnostics of {name}\nbench log:\n{bench.stderr}"
        + "\n".join(noted)
        + "\nserver warnings and drains:\n"
        + "\n".join(warnings[-40:])
        + f"\npods:\n{pods.stdout}\nevents (last 40):\n"
        + "\n".join(events.stdout.splitlines()[-40:])
    )
    print(text)
    # What a failed assertion shows, a string so that pytest does not cut
    # it short: a CI log's excerpt may keep only the end of the output.
    closes = [line for line in warnings if "listener closed" in line][-4:]
    return f"diagnostics of {name} printed above; bench: " + " | ".join(noted[:10] + closes)[:2000]


def figures(f: dict[str, Any]) -> str:
    """figures is one fault's line for the docs' chaos table."""
    return (
        f"errors {f.get('errors')}, Retry-After {f.get('retryAfter')}, first error {f.get('firstErrorSeconds')} s, "
        f"unavailable {f.get('unavailableSeconds')} s, recovery {f.get('recoverySeconds')} s"
    )


def test_server_and_operator_pods_killed(fault_pool: str) -> None:
    """SIGKILL of one of the two sluice-server pods: the Service routes around
    it; only requests in flight on it fail; nothing is lost. Then the
    operator's own pod: the data plane does not notice, and the new operator
    follows the run to its end."""
    ns = fault_pool
    faults = [{"at": 6, "action": "kill", "target": "server"}, {"at": 16, "action": "kill", "target": "operator"}]
    b = run(ns, benchmark(ns, "f-server", pool="faults", duration=26, faults=faults))
    st = b["status"]
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"))
    r = st["results"]
    assert r["lost"] == 0, r
    assert r["errors"] <= WORKERS, f"{r['errors']} failed requests: more than the {WORKERS} that can be in flight"
    f, op = st["faults"]
    assert f["result"] == "Injected" and f["pod"].startswith("sluice-server-"), f
    assert op["result"] == "Injected" and op["pod"].startswith(RELEASE), op
    st = reported(ns, "f-server")
    f, op = st["faults"]
    print(f"\nserver pod killed: {figures(f)}\noperator pod killed: {figures(op)}")
    assert f["unavailableSeconds"] < 10, f
    # A null figure (nothing failed) may arrive as an absent field.
    assert op.get("firstErrorSeconds") is None and not op.get("errors"), op


def test_shard_and_catalog_pods_killed(fault_pool: str) -> None:
    """SIGKILL of a shard's Redis: its queues answer 503 with Retry-After
    until the pod is back from its AOF (nothing else fails: no 500, no
    timeout, and every 503 carries the header, as status.faults counts them);
    no acknowledged message is lost after it returns. Then the catalog's pod:
    queues already placed keep working from the servers' cache."""
    ns = fault_pool
    b = run(
        ns,
        benchmark(
            ns,
            "f-shard",
            pool="faults",
            duration=40,
            faults=[
                {"at": 6, "action": "kill", "target": "shard", "pool": "faults", "shard": 0},
                {"at": 28, "action": "kill", "target": "catalog"},
                # Due long after the load: the run ends first.
                {"at": 3600, "action": "delete", "target": "server", "name": "late"},
            ],
        ),
    )
    st = b["status"]
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"))
    assert st["results"]["lost"] == 0, st["results"]
    f, cat, late = st["faults"]
    assert f["result"] == "Injected" and f["pod"].startswith("faults-0"), f
    assert cat["result"] == "Injected", cat
    assert late["result"] == "NotReached" and late["index"] == 2 and "injected" not in late, late
    assert "3600 s after the load started" in late["message"], late
    warned = kc("get", "events", "-n", ns, "--field-selector", "reason=FaultNotReached", "-o", "name").stdout
    assert warned.strip(), "no FaultNotReached Event"
    st = reported(ns, "f-shard")
    f, cat, late = st["faults"]
    assert late["result"] == "NotReached" and "errors" not in late, late
    errors = f.get("errors") or {}
    print(f"\nshard pod killed: {figures(f)}\ncatalog pod killed: {figures(cat)}")
    # What the docs' fault table says of this row, from what sluice-bench
    # measured in the fault's window: the shard's queues failed, every
    # failure was a 503, and every 503 carried a readable Retry-After.
    assert errors.get("http_503"), f"the shard's queues never answered 503: {errors}: {diagnostics(ns, 'f-shard')}"
    unexpected = {k: v for k, v in errors.items() if k != "http_503"}
    assert not unexpected, f"failures other than 503 {unexpected}: {diagnostics(ns, 'f-shard')}"
    retry = (f.get("retryAfter") or {}).get("http_503") or {}
    assert retry.get("responses") == errors["http_503"] and not retry.get("unreadable"), (
        f"{errors['http_503']} answers 503, Retry-After {retry}: {diagnostics(ns, 'f-shard')}"
    )
    assert f.get("recoverySeconds") is not None, f
    # The queues are placed: the servers route them from their cache while
    # the catalog restarts.
    assert cat.get("firstErrorSeconds") is None and not cat.get("errors"), f"{cat}: {diagnostics(ns, 'f-shard')}"


def server_tag(tag: str) -> None:
    """server_tag upgrades the release to run sluice-server from image tag `tag`."""
    exe = os.environ.get("HELM") or os.environ.get("SLUICE_HELM") or "helm"
    chart = str(ROOT / "charts/sluice")
    args = ["upgrade", RELEASE, chart, "-n", RELEASE_NS, "--reuse-values", "--set", f"server.image.tag={tag}", "--wait"]
    subprocess.run([exe, *args], check=True, capture_output=True, text=True, timeout=600)


def test_rolling_upgrade_fails_no_request(fault_pool: str) -> None:
    """`helm upgrade` changing the server's image tag while a Benchmark runs:
    the operator rolls every namespace's sluice-server (readiness gating, the
    drain delay answering Connection: close) and no request fails."""
    ns = fault_pool
    sock = "/run/sluice/containerd/containerd.sock"
    src, alias = "sluice.dev/sluice-server:dev", "sluice.dev/sluice-server:rolling"
    subprocess.run(["ctr", "--address", sock, "-n", "k8s.io", "images", "rm", alias], capture_output=True, check=False)
    subprocess.run(
        ["ctr", "--address", sock, "-n", "k8s.io", "images", "tag", src, alias], check=True, capture_output=True
    )
    errors: list[BaseException] = []

    def upgrade() -> None:
        try:
            wait_for(
                "f-roll Running",
                lambda: (o := get("benchmark", ns, "f-roll")) and (o.get("status") or {}).get("phase") == "Running",
                timeout=300,
            )
            time.sleep(8)
            server_tag("rolling")
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    t = threading.Thread(target=upgrade)
    t.start()
    try:
        b = run(ns, benchmark(ns, "f-roll", pool="faults", duration=60))
        t.join(timeout=600)
        assert not errors, errors
        dep = get("deployment", ns, "sluice-server")
        images = {c["image"] for c in dep["spec"]["template"]["spec"]["containers"]}
        assert images == {alias}, f"the server was not rolled: {images}"
        st = b["status"]
        assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"))
        r = st["results"]
        print(f"\nrolling upgrade under load: {r['requests']} requests, {r['errors']} failed, lost {r['lost']}")
        failed = {op: v.get("errors") for op, v in r["operations"].items() if v.get("errors")}
        assert r["errors"] == 0 and r["lost"] == 0, f"failed {failed}, lost {r['lost']}: {diagnostics(ns, 'f-roll')}"
    finally:
        t.join(timeout=600)
        server_tag("dev")
        kc("rollout", "status", "deployment/sluice-server", "-n", ns, "--timeout=180s", check=False)
