"""Every Kopf decorator of the operator, in one place; the bodies are in handlers/.

Handlers are registered only on sluice.dev kinds. Third-party objects
(Redis, RedisReplication, MongoDBCommunity) are created and read from these
handlers but never watched, so Kopf writes nothing onto them.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from typing import Any

import kopf

from . import GROUP, VERSION
from .config import Config
from .handlers import benchmark, pool, queue
from .handlers import benchmark_results as bench_results

CONFIG = Config.from_env()
CONFIG_FINALIZER = f"{GROUP}/finalizer"
POOLS = (GROUP, VERSION, "pools")
QUEUES = (GROUP, VERSION, "queues")
BENCHMARKS = (GROUP, VERSION, "benchmarks")
BENCH = benchmark.Settings.from_env()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """configure keeps Kopf's own state under sluice.dev and bounds every watch."""
    settings.persistence.finalizer = CONFIG_FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # The apiserver closes the watch after server_timeout; the client gives up
    # a little later, so a silently dead connection never stalls the operator.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    settings.execution.max_workers = 8
    # A deletion waits for the object's timers to exit. A tick caught mid-run
    # finishes within its bounded calls, but Kopf looks again only after this
    # polling interval (60 s by default), which held every such deletion a minute.
    settings.background.cancellation_polling = 1
    settings.posting.level = logging.INFO


def _plain(body: Any) -> dict[str, Any]:
    # Handlers and builders work on plain dicts, never on Kopf's live views.
    return copy.deepcopy(dict(body))


def _deleting(plain: dict[str, Any]) -> float | None:
    """Seconds since the object was marked for deletion, None when it is not."""
    ts = plain["metadata"].get("deletionTimestamp")
    if not ts:
        return None
    when = dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return (dt.datetime.now(dt.UTC) - when).total_seconds()


def _finish_deletion(plain: dict[str, Any], patch: kopf.Patch, delete: Any) -> None:
    """Timers can outlive a deletion Kopf has not acted on (seen while a namespace
    terminates): run the deletion body from the timer and release our finalizer,
    so nothing ever hangs. Retries are counted in 5-second steps of the wait."""
    elapsed = _deleting(plain) or 0.0
    try:
        delete(int(elapsed // 5))
    except kopf.TemporaryError:
        return
    finalizers = plain["metadata"].get("finalizers") or []
    if CONFIG_FINALIZER in finalizers:
        patch.metadata["finalizers"] = [f for f in finalizers if f != CONFIG_FINALIZER]


@kopf.on.create(*POOLS)
@kopf.on.update(*POOLS, field="spec")
@kopf.on.resume(*POOLS)
def pool_changed(body: Any, patch: kopf.Patch, logger: Any, **_: Any) -> None:
    """A Pool appeared or its spec changed: converge now rather than at the next tick."""
    plain = _plain(body)
    if _deleting(plain) is None:
        pool.reconcile(CONFIG, plain, patch, logger)


@kopf.timer(*POOLS, interval=CONFIG.pool_interval, initial_delay=1)
def pool_tick(body: Any, patch: kopf.Patch, logger: Any, **_: Any) -> None:
    """Probe shards, follow scheduling and scale-down, keep status current."""
    plain = _plain(body)
    if _deleting(plain) is not None:
        _finish_deletion(plain, patch, lambda retry: pool.delete(CONFIG, plain, patch, retry, logger))
        return
    pool.reconcile(CONFIG, plain, patch, logger)


@kopf.on.delete(*POOLS)
def pool_deleted(body: Any, patch: kopf.Patch, retry: int, logger: Any, **_: Any) -> None:
    """A Pool is being deleted: refuse while it holds queues, else unregister its shards."""
    pool.delete(CONFIG, _plain(body), patch, retry, logger)


@kopf.index(*QUEUES)
def queue_claims(body: Any, **_: Any) -> dict[tuple[str, str, str], queue.Claim]:
    """Every Queue's claim, by the server-side queue it names: two Queues of a
    namespace may name the same one (queue.owner decides which acts)."""
    plain = _plain(body)
    return {(plain["metadata"]["namespace"], *queue.identity(plain)): queue.claim(plain)}


def _claims(plain: dict[str, Any], kwargs: dict[str, Any]) -> list[queue.Claim]:
    """The claims on the server-side queue plain names (Kopf passes each index as a
    keyword argument named after its function)."""
    index: kopf.Index[tuple[str, str, str], queue.Claim] = kwargs["queue_claims"]
    return list(index.get((plain["metadata"]["namespace"], *queue.identity(plain)), []))


@kopf.on.create(*QUEUES)
@kopf.on.update(*QUEUES, field="spec")
@kopf.on.resume(*QUEUES)
def queue_changed(body: Any, patch: kopf.Patch, retry: int, logger: Any, **kw: Any) -> None:
    """A Queue appeared or changed: create or update it on the server, retrying soon until Ready."""
    plain = _plain(body)
    if _deleting(plain) is not None:
        return
    queue.reconcile(CONFIG, plain, patch, logger, _claims(plain, kw))
    conds = patch.get("status", {}).get("conditions") or (plain.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    if not ready or ready.get("status") != "True":
        # Soon at first (a Pool becoming Ready), then backing off to the timer's pace.
        delay = min(2 * (retry + 1), CONFIG.queue_interval)
        raise kopf.TemporaryError((ready or {}).get("message", "not ready"), delay=delay)


@kopf.timer(*QUEUES, interval=CONFIG.queue_interval, initial_delay=CONFIG.queue_interval)
def queue_tick(body: Any, patch: kopf.Patch, logger: Any, **kw: Any) -> None:
    """Refresh message counts (and heal a queue that disappeared from the server)."""
    plain = _plain(body)
    claims = _claims(plain, kw)
    if _deleting(plain) is not None:
        _finish_deletion(plain, patch, lambda retry: queue.delete(CONFIG, plain, retry, logger, claims))
        return
    queue.reconcile(CONFIG, plain, patch, logger, claims)


@kopf.on.delete(*QUEUES)
def queue_deleted(body: Any, retry: int, logger: Any, **kw: Any) -> None:
    """A Queue is being deleted: remove it from the server unless Retain or another Queue names it; never hang."""
    plain = _plain(body)
    queue.delete(CONFIG, plain, retry, logger, _claims(plain, kw))


# Benchmarks are driven by one timer only: a new spec generation starts a run, an
# active run is followed, a finished one gets its report. A single code path means
# a run is never started twice by a change handler and a timer racing each other.
@kopf.timer(*BENCHMARKS, interval=BENCH.interval)
def benchmark_tick(body: Any, patch: kopf.Patch, logger: Any, **_: Any) -> None:
    """Start a run for a new spec, follow the active run (never stuck in Running), render the report."""
    benchmark.reconcile(CONFIG, BENCH, _plain(body), patch, logger)


@kopf.timer(*BENCHMARKS, interval=30, initial_delay=30)
def benchmark_compare(body: Any, patch: kopf.Patch, **_: Any) -> None:
    """Keep status.comparison current when the compared Benchmark finishes later."""
    benchmark.refresh_comparison(_plain(body), patch)


@kopf.on.delete(*BENCHMARKS, optional=True)
def benchmark_deleted(body: Any, **_: Any) -> None:
    """Drop a deleted Benchmark's gauges (its Job and ConfigMaps are garbage-collected)."""
    bench_results.forget(body["metadata"]["namespace"], body["metadata"]["name"])
