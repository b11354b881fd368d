"""Operator figures on the local cluster (control-plane mode is enough):
Pool apply -> Ready, Queue apply -> Ready, and the operator's memory with N
Queues. Shards are local redis-server processes given to an `external` Pool
and the namespace's server is a local sluice-server process, so the whole
path (probe, registration, queue creation, stats) is real without a kubelet.

    make bench-operator   (QUEUES=100)
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "operator"))

from tests.integration.conftest import KUBECONFIG, apply, condition, get, kc  # noqa: E402
from tests.support import Processes, free_port, server_stack  # noqa: E402


def wait(what: str, fn, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if fn():
            return time.monotonic() - start
        time.sleep(0.1)
    raise SystemExit(f"timed out after {timeout}s: {what}")


def rss_mb(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> int:
    n_queues = int(os.environ.get("QUEUES", "100"))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sluice-opbench-"))
    procs = Processes()
    ns = f"opbench-{uuid.uuid4().hex[:6]}"
    try:
        # The stack of tests/integration/test_external.py: shards and server on loopback.
        srv = server_stack(procs, tmp)
        kc("apply", "-f", str(ROOT / "crds"))
        kc("create", "namespace", ns)
        for secret in srv.secrets(ns):
            apply(secret)
        op_env = {
            **os.environ,
            "KUBECONFIG": str(KUBECONFIG),
            "SLUICE_OPERATOR_WATCH_NAMESPACES": ns,
            "SLUICE_OPERATOR_SERVER_URL_TEMPLATE": srv.base,
            "SLUICE_OPERATOR_METRICS_PORT": str(free_port()),
            "SLUICE_OPERATOR_LIVENESS_PORT": str(free_port()),
            "SLUICE_OPERATOR_POOL_INTERVAL": "5",
            "SLUICE_OPERATOR_QUEUE_INTERVAL": "15",
        }
        op = procs.start([sys.executable, "-m", "sluice_operator.cli"], log=tmp / "operator.log", env=op_env)
        time.sleep(2)
        apply(
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Pool",
                "metadata": {"name": "bench", "namespace": ns},
                "spec": {
                    "backend": "redis",
                    "provisioner": "external",
                    "shards": 2,
                    "placement": {"nodeClass": "any"},
                    "external": {"secretRef": {"name": "shards"}},
                },
            }
        )
        pool_s = wait("Pool Ready", lambda: condition(get("pool", ns, "bench"), "Ready").get("status") == "True", 120)
        apply(
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": "first", "namespace": ns},
                "spec": {"pool": "bench"},
            }
        )
        queue_s = wait("Queue Ready", lambda: condition(get("queue", ns, "first"), "Ready").get("status") == "True", 60)
        docs = [
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": f"q{i:03d}", "namespace": ns},
                "spec": {"pool": "bench"},
            }
            for i in range(n_queues - 1)
        ]
        start = time.monotonic()
        kc("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))

        def all_ready() -> bool:
            items = json.loads(kc("get", "queues", "-n", ns, "-o", "json").stdout)["items"]
            return sum(1 for q in items if condition(q, "Ready").get("status") == "True") >= n_queues

        wait(f"{n_queues} Queues Ready", all_ready, 600)
        all_s = time.monotonic() - start
        time.sleep(20)  # a few timer rounds with every queue live
        rss, hwm = rss_mb(op.pid)
        print(
            json.dumps(
                {
                    "pool_apply_to_ready_s": round(pool_s, 2),
                    "queue_apply_to_ready_s": round(queue_s, 2),
                    f"{n_queues}_queues_ready_s": round(all_s, 1),
                    "operator_rss_mb": round(rss, 1),
                    "operator_peak_rss_mb": round(hwm, 1),
                    "queues": n_queues,
                },
                indent=2,
            )
        )
        return 0
    finally:
        # The operator must still run while the sluice objects go: it releases their
        # finalizers (a namespace-scoped operator stops serving a terminating namespace).
        try:
            kc("delete", "queues,pools", "--all", "-n", ns, "--timeout=80s", check=False)
            kc("delete", "namespace", ns, "--wait=false", check=False)
        except subprocess.TimeoutExpired:
            pass
        procs.stop()


if __name__ == "__main__":
    sys.exit(main())
