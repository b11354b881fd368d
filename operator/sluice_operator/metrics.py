"""Prometheus metrics of the operator, on its own registry: reconciles and
errors per kind, and the Ready state of every Pool and Queue as gauges."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

REGISTRY = CollectorRegistry()

RECONCILES = Counter("sluice_operator_reconciles_total", "Reconciliations run, by kind.", ["kind"], registry=REGISTRY)
ERRORS = Counter(
    "sluice_operator_reconcile_errors_total",
    "Reconciliations that ended in an error (retried), by kind and reason.",
    ["kind", "reason"],
    registry=REGISTRY,
)
POOL_READY = Gauge("sluice_pool_ready", "1 when the Pool is Ready.", ["namespace", "pool"], registry=REGISTRY)
POOL_SHARDS_READY = Gauge(
    "sluice_pool_shards_ready", "Shards answering their probe.", ["namespace", "pool"], registry=REGISTRY
)
QUEUE_READY = Gauge("sluice_queue_ready", "1 when the Queue is Ready.", ["namespace", "queue"], registry=REGISTRY)
QUEUE_MESSAGES = Gauge(
    "sluice_queue_messages",
    "Messages in the queue as last read from the server, by state.",
    ["namespace", "queue", "state"],
    registry=REGISTRY,
)
QUEUE_OLDEST_AGE = Gauge(
    "sluice_queue_oldest_message_age_seconds",
    "Age of the oldest message in the queue as last read from the server.",
    ["namespace", "queue"],
    registry=REGISTRY,
)


def forget_pool(namespace: str, pool: str) -> None:
    """forget_pool drops a deleted Pool's series."""
    for g in (POOL_READY, POOL_SHARDS_READY):
        with contextlib.suppress(KeyError):
            g.remove(namespace, pool)


def forget_queue(namespace: str, queue: str) -> None:
    """forget_queue drops a deleted Queue's series."""
    for g in (QUEUE_READY, QUEUE_OLDEST_AGE):
        with contextlib.suppress(KeyError):
            g.remove(namespace, queue)
    for state in ("free", "claimed", "total"):
        with contextlib.suppress(KeyError):
            QUEUE_MESSAGES.remove(namespace, queue, state)


def serve(port: int) -> None:
    """serve exposes /metrics on `port` (0: disabled)."""
    if port:
        start_http_server(port, registry=REGISTRY)
