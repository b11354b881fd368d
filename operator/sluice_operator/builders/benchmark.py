"""A Benchmark run as Kubernetes objects: the sluice-bench command line, the
ConfigMap that records the run's exact parameters, and the indexed Job whose
pods start the load together.

Thresholds are not passed to the pods: each pod sees only its share of the
load, so req/s and p99 thresholds are judged by the operator on the merged
result (as `sluice-bench merge` re-checks them).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from ..config import Config
from . import common, tls

LABEL_BENCHMARK = "sluice.dev/benchmark"
LABEL_RUN = "sluice.dev/run"
TERMINATION_LOG = "/dev/termination-log"
# The index the Job controller gives each pod; passed as --pod-index.
INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
TOKEN_ENV = "SLUICE_BENCH_TOKEN"
# spec.move: the admin token sluice-bench sends on the migrate calls only, read
# from the environment so it is in neither the pod's args nor the parameters ConfigMap.
ADMIN_TOKEN_ENV = "SLUICE_BENCH_ADMIN_TOKEN"
MOVE_AFTER_SECONDS = 2
MOVE_TIMEOUT_SECONDS = 120
# notifications: each pod's webhook receiver, which the server reaches at the pod's IP.
POD_IP_ENV = "SLUICE_BENCH_POD_IP"
# Auth mode kubernetes: the pod's own ServiceAccount token, projected for the
# server's audience, which sluice-bench re-reads as the kubelet rotates it.
TOKEN_DIR = "/var/run/secrets/sluice"
TOKEN_SECONDS = 3600
RECEIVER_PORT = 9000

# Seconds of load per preset (sweeps: all their steps), for the default deadline.
PRESET_SECONDS = {"flood": 8 * 5, "packing": 4 * 5 + 60, "fairness": 300}
# Queues per pod of each preset (the others use 4).
PRESET_QUEUES = {"point-to-point": 1, "flood": 1, "packing": 1, "fairness": 1, "notifications": 1}
PRESET_DEFAULT_SECONDS = 10
# Queue setup, the drain after the load (30 s) and pod start-up.
DEADLINE_MARGIN = 180
# A run with faults claims for the shortest ttl a server takes, so messages
# held by a claim whose answer a fault lost come back within the run's drain,
# which waits for them (the drain ends as soon as the queues are empty when
# nothing is in doubt).
FAULT_CLAIM_SECONDS = 60
FAULT_DRAIN_SECONDS = FAULT_CLAIM_SECONDS + 60


def _short(name: str, suffix: str, limit: int = 63) -> str:
    # Object and label values are limited to 63 characters; keep them unique with a hash.
    full = f"{name}-{suffix}"
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:6]
    return f"{name[: limit - len(suffix) - 8]}-{digest}-{suffix}"


def job_name(name: str, run: int) -> str:
    """job_name names the Job of run `run` (the spec generation) of Benchmark `name`."""
    return _short(name, f"r{run}", 52)  # pods append -<index>-<random5>


def params_name(name: str, run: int) -> str:
    """params_name names the ConfigMap with the run's exact parameters."""
    return _short(name, f"r{run}-params")


def report_name(name: str, run: int) -> str:
    """report_name names the ConfigMap holding the run's report (HTML, plots, CSV)."""
    return _short(name, f"r{run}-report")


def queue_prefix(body: dict[str, Any], run: int) -> str:
    """queue_prefix makes every run's queues its own, so no run sees another's messages."""
    return _short(f"bench-{body['metadata']['name']}", f"r{run}", 48)


def target_url(cfg: Config, body: dict[str, Any]) -> str:
    """target_url is spec.target.url or the namespace's sluice-server Service."""
    url = ((body["spec"].get("target") or {}).get("url") or "").strip()
    if url:
        return url
    return f"{tls.scheme(cfg)}://{common.SERVER_NAME}.{body['metadata']['namespace']}.svc:{cfg.server_port}"


def project(body: dict[str, Any]) -> str:
    """project is the X-Project-ID of the load: spec.target.project or the namespace."""
    return (body["spec"].get("target") or {}).get("project") or body["metadata"]["namespace"]


def load_seconds(spec: dict[str, Any]) -> int:
    """load_seconds estimates how long the load runs, for the default deadline."""
    if spec.get("duration"):
        return int(spec["duration"])
    if spec["scenario"] == "custom":
        return int((spec.get("custom") or {}).get("duration", 60))
    return PRESET_SECONDS.get(spec["scenario"], PRESET_DEFAULT_SECONDS)


def deadline(spec: dict[str, Any], start_delay: int) -> int:
    """deadline is spec.activeDeadlineSeconds, else the load time plus a margin."""
    if spec.get("activeDeadlineSeconds"):
        return int(spec["activeDeadlineSeconds"])
    extra = FAULT_DRAIN_SECONDS if spec.get("faults") else 0
    if spec.get("move"):
        # The drain waits for the move, which may outlast the load.
        extra += int(spec["move"].get("timeoutSeconds", MOVE_TIMEOUT_SECONDS))
    return load_seconds(spec) + start_delay + DEADLINE_MARGIN + extra


def bench_args(cfg: Config, body: dict[str, Any], run: int, start_at: str) -> list[str]:
    """bench_args is the sluice-bench command line of every pod of the run."""
    spec = body["spec"]
    args = ["run", "--scenario", spec["scenario"], "-s", target_url(cfg, body)]
    args += ["--project-id", project(body), "-q", queue_prefix(body, run)]
    if spec["scenario"] == "custom":
        c = spec.get("custom") or {}
        for flag, role in (("p", "producers"), ("c", "consumers"), ("o", "observers")):
            r = c.get(role) or {}
            args += [f"-{flag}p", str(r.get("processes", 1)), f"-{flag}w", str(r.get("workers", 10))]
        args += ["-t", str(spec.get("duration") or c.get("duration", 60))]
        args += ["--message-size", str(c.get("messageSize", 1024)), "-qno", str(c.get("queues", 4))]
        if c.get("rate"):
            args += ["--rate", _num(c["rate"])]
        # zaqar-bench's custom mode has no delivery check; verify whenever there are consumers.
        if (c.get("consumers") or {}).get("workers", 10) and (c.get("producers") or {}).get("workers", 10):
            args.append("--verify")
    elif spec.get("duration"):
        args += ["-t", str(spec["duration"])]
    if spec.get("pool"):
        # The operator creates the queues in the Pool's flavor before the run: name them exactly.
        if spec["scenario"] != "custom":
            args += ["-qno", str(queues_per_pod(spec))]
        args.append("--skip_queue_reset")
    if (spec.get("target") or {}).get("tokenSecretRef"):
        args += ["--token", f"$({TOKEN_ENV})"]
    elif projected_token(cfg, body):
        args += ["--token-file", f"{TOKEN_DIR}/token"]
    if spec["scenario"] == "notifications":
        args += ["--receiver-listen", f"0.0.0.0:{RECEIVER_PORT}"]
        args += ["--receiver-url", f"http://$({POD_IP_ENV}):{RECEIVER_PORT}/notify"]
    for f in spec.get("faults") or []:
        if f["action"] == "slow-receiver":
            # The receiver is sluice-bench's own: it keeps the schedule, from the same load start.
            args += [
                "--receiver-fault",
                f"at={_num(f['at'])},duration={int(f['duration'])},"
                f"latency={int(f.get('latencyMs') or 0)}ms,fail={int(f.get('failPercent') or 0)}",
            ]
    if spec.get("faults"):
        claim = str(FAULT_CLAIM_SECONDS)
        args += ["--claim-ttl", claim, "--claim-grace", claim, "--drain", f"{FAULT_DRAIN_SECONDS}s"]
    move = spec.get("move")
    if move:
        args += [
            "--move-to-pool",
            move["pool"],
            "--move-after",
            f"{int(move.get('afterSeconds', MOVE_AFTER_SECONDS))}s",
        ]
        args += ["--move-timeout", f"{int(move.get('timeoutSeconds', MOVE_TIMEOUT_SECONDS))}s"]
    args += ["--start-at", start_at, "--pod-index", f"$({INDEX_ENV})"]
    # stdout carries the full summary with per-second series (the report's input);
    # the termination log the compact mergeable summary (the status's input).
    args += ["--json", "--series", "--progress", "never", "--termination-log", TERMINATION_LOG]
    return args


def projected_token(cfg: Config, body: dict[str, Any]) -> bool:
    """projected_token: the pods authenticate with their own ServiceAccount token
    (auth mode kubernetes, and no spec.target.tokenSecretRef or foreign target URL)."""
    target = body["spec"].get("target") or {}
    return cfg.auth_mode == "kubernetes" and not target.get("tokenSecretRef") and not target.get("url")


def admin_token_ref(spec: dict[str, Any]) -> dict[str, str]:
    """admin_token_ref is the Secret key holding the admin token of spec.move: its
    adminTokenSecretRef, else the namespace's sluice-server admin Secret. Only runs with
    spec.move get it: the migrate call is admin-only on the server, which has no narrower role."""
    ref = (spec.get("move") or {}).get("adminTokenSecretRef")
    if ref:
        return {"name": ref["name"], "key": ref.get("key", "token")}
    return {"name": common.ADMIN_SECRET, "key": "token"}


def _num(v: Any) -> str:
    f = float(v)
    return str(int(f)) if f.is_integer() else str(f)


def queues_per_pod(spec: dict[str, Any]) -> int:
    """queues_per_pod is the number of queues each pod uses."""
    if spec["scenario"] == "custom":
        return int((spec.get("custom") or {}).get("queues", 4))
    return PRESET_QUEUES.get(spec["scenario"], 4)


def queue_names(body: dict[str, Any], run: int) -> list[str]:
    """queue_names are the queues the pods use (`--pod-index` suffixes the prefix with -pN)."""
    prefix = queue_prefix(body, run)
    pods = int(body["spec"].get("parallelism", 1))
    queues = queues_per_pod(body["spec"])
    return [f"{prefix}-p{p}-{q}" for p in range(pods) for q in range(queues)]


def pod_labels(cfg: Config, body: dict[str, Any], run: int) -> dict[str, str]:
    """pod_labels select exactly the pods of one run."""
    return common.labels(cfg, "benchmark", {LABEL_BENCHMARK: body["metadata"]["name"], LABEL_RUN: str(run)})


def placement_fields(cfg: Config, body: dict[str, Any], lbls: dict[str, str]) -> dict[str, Any]:
    """placement_fields: metal nodes by default, spread over nodes, and (avoidTargets) never on
    a node running the namespace's server, catalog or backends, so the load generator does not
    steal the CPU it measures."""
    placement = dict(body["spec"].get("placement") or {})
    placement.setdefault("nodeClass", "metal")
    placement.setdefault("policy", "preferred")
    out = common.placement_pod_fields(cfg, placement, {k: v for k, v in lbls.items() if k != LABEL_RUN})
    # Spread this run's pods over nodes (softly): common selectors know no runs.
    for pref in (
        out.get("affinity", {}).get("podAntiAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
    ):
        pref["podAffinityTerm"]["labelSelector"] = {
            "matchLabels": {LABEL_BENCHMARK: lbls[LABEL_BENCHMARK], LABEL_RUN: lbls[LABEL_RUN]}
        }
    if placement.get("avoidTargets", True):
        term = {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {
                "matchLabels": {"app.kubernetes.io/name": "sluice"},
                "matchExpressions": [
                    {"key": common.LABEL_COMPONENT, "operator": "In", "values": ["server", "catalog", "backend"]}
                ],
            },
        }
        anti = out.setdefault("affinity", {}).setdefault("podAntiAffinity", {})
        anti["requiredDuringSchedulingIgnoredDuringExecution"] = [term]
    return out


def _meta(cfg: Config, body: dict[str, Any], name: str, run: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": body["metadata"]["namespace"],
        "labels": pod_labels(cfg, body, run),
        "ownerReferences": [common.owner_ref({**body, "kind": "Benchmark"})],
    }


def parameters(cfg: Config, body: dict[str, Any], run: int, start_at: str, image: str) -> dict[str, Any]:
    """parameters is the ConfigMap recording exactly what the run was asked to do."""
    args = bench_args(cfg, body, run, start_at)
    data = {
        "spec.json": json.dumps(body["spec"], sort_keys=True, indent=2),
        "args.json": json.dumps(args),
        "command": shlex.join(["sluice-bench", *args]),
        "image": image,
        "start-at": start_at,
        "run": str(run),
        "target": target_url(cfg, body),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(cfg, body, params_name(body["metadata"]["name"], run), run),
        "data": data,
    }


def report(cfg: Config, body: dict[str, Any], run: int, payload: dict[str, Any]) -> dict[str, Any]:
    """report is the ConfigMap holding a run's report; payload is its data and binaryData."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(cfg, body, report_name(body["metadata"]["name"], run), run),
        **payload,
    }


def job(cfg: Config, body: dict[str, Any], run: int, start_at: str, start_delay: int) -> dict[str, Any]:
    """job is the indexed Job of one run: `parallelism` pods, all started at `start_at`,
    none retried (a retried pod would distort the merged result)."""
    spec = body["spec"]
    name = body["metadata"]["name"]
    pods = int(spec.get("parallelism", 1))
    image = spec.get("image") or cfg.bench_image
    lbls = pod_labels(cfg, body, run)
    env: list[dict[str, Any]] = [
        {"name": INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}
    ]
    ref = (spec.get("target") or {}).get("tokenSecretRef")
    if ref:
        env.append(
            {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": ref["name"], "key": ref.get("key", "token")}}}
        )
    if spec.get("move"):
        env.append({"name": ADMIN_TOKEN_ENV, "valueFrom": {"secretKeyRef": admin_token_ref(spec)}})
    if spec["scenario"] == "notifications":
        env.append({"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    container: dict[str, Any] = {
        "name": "sluice-bench",
        "image": image,
        "imagePullPolicy": cfg.image_pull_policy,
        "args": bench_args(cfg, body, run, start_at),
        "env": env,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
        "securityContext": common.container_security(cfg),
    }
    if spec["scenario"] == "notifications":
        container["ports"] = [{"name": "webhook", "containerPort": RECEIVER_PORT}]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "securityContext": common.pod_security(cfg, uid=65532),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        **placement_fields(cfg, body, lbls),
    }
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = common.pull_secrets(cfg)
    if projected_token(cfg, body):
        token = {"audience": cfg.auth_audience, "expirationSeconds": TOKEN_SECONDS, "path": "token"}
        pod_spec["volumes"] = [{"name": "sluice-token", "projected": {"sources": [{"serviceAccountToken": token}]}}]
        container["volumeMounts"] = [{"name": "sluice-token", "mountPath": TOKEN_DIR, "readOnly": True}]
    tls.trust_server_ca(cfg, container, pod_spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(cfg, body, job_name(name, run), run),
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline(spec, start_delay),
            "template": {"metadata": {"labels": lbls}, "spec": pod_spec},
        },
    }
