"""Exact merge of sluice-bench termination logs (one per pod), with
sluice-bench's own rules (docs/sluice-bench.md, "Merge semantics"):
counters are summed, HdrHistograms merged bucket by bucket (never averaged
percentiles), the window is min(start)..max(end), and delivery bitsets are
OR-ed per origin so a message claimed in two pods counts as duplicated and
lost = produced &^ claimed over all pods. A pod whose log lost its bitsets
makes the delivery counts plain sums, which are exact only when every pod had
queues of its own (own_queues: the operator's runs always do)."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

# sluice-bench's histograms: microseconds, 1 us .. 120 s, 3 significant digits.
HIST_MIN, HIST_MAX, HIST_DIGITS = 1, 120_000_000, 3


class MergeError(ValueError):
    """A termination log that cannot be merged; the message says which pod and why."""


def new_hist() -> HdrHistogram:
    """new_hist is an empty histogram with sluice-bench's range and precision."""
    return HdrHistogram(HIST_MIN, HIST_MAX, HIST_DIGITS)


def _approx_hist(op: dict[str, Any]) -> HdrHistogram:
    # The log shed its histogram: spread the samples over the recorded
    # percentiles, as sluice-bench does (its `trunc` says so).
    h, n = new_hist(), int(op.get("ok", 0))
    used = 0
    for key, frac in (("p50", 0.5), ("p90", 0.4), ("p99", 0.09), ("p999", 0.009)):
        k = int(n * frac)
        if k:
            h.record_value(max(1, int(float(op.get(key, 0)) * 1000)), k)
        used += k
    if n - used > 0:
        h.record_value(max(1, int(float(op.get("max", 0)) * 1000)), n - used)
    return h


@dataclass
class Op:
    """Op is one operation's merged counters and histogram."""

    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    extra: dict[str, int] = field(default_factory=dict)
    hist: HdrHistogram = field(default_factory=new_hist)

    def add(self, op: dict[str, Any]) -> None:
        """add folds one pod's compact op ({n, ok, err, x, h, p50..}) in."""
        self.requests += int(op.get("n", 0))
        self.ok += int(op.get("ok", 0))
        for src, dst in ((op.get("err") or {}, self.errors), (op.get("x") or {}, self.extra)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + int(v)
        if op.get("h"):
            try:
                other = HdrHistogram.decode(op["h"])
            except Exception as exc:  # the decoder raises several types for a corrupt payload
                raise MergeError(f"undecodable histogram: {exc}") from exc
        elif op.get("ok"):
            other = _approx_hist(op)
        else:
            return
        self.hist.add(other)

    def summary(self, seconds: float) -> dict[str, Any]:
        """summary derives rates and percentiles (ms) over a window of `seconds`."""
        h = self.hist
        empty = h.get_total_count() == 0

        def ms(us: int) -> float:
            return 0.0 if empty else round(us / 1000, 3)

        return {
            "requests": self.requests,
            "ok": self.ok,
            "errors": self.requests - self.ok,
            "errorReasons": dict(sorted(self.errors.items())),
            "extra": dict(sorted(self.extra.items())),
            "requestsPerSecond": round(self.ok / seconds, 3) if seconds > 0 else 0.0,
            "msPerRequest": 0.0 if empty else round(h.get_mean_value() / 1000, 3),
            "p50Ms": ms(h.get_value_at_percentile(50)),
            "p90Ms": ms(h.get_value_at_percentile(90)),
            "p99Ms": ms(h.get_value_at_percentile(99)),
            "p999Ms": ms(h.get_value_at_percentile(99.9)),
            "maxMs": ms(h.get_max_value()),
        }


def decode_bits(s: str) -> int:
    """decode_bits turns sluice-bench's base64(zlib(little-endian uint64 words)) into an int."""
    try:
        return int.from_bytes(zlib.decompress(base64.b64decode(s)), "little")
    except (ValueError, zlib.error) as exc:
        raise MergeError(f"undecodable delivery bitset: {exc}") from exc


@dataclass
class Delivery:
    """Delivery accumulates the pods' delivery verification."""

    pods_counts: dict[str, int] = field(default_factory=dict)
    consumed: int = 0
    duplicated: int = 0
    produced_bits: dict[str, int] | None = field(default_factory=dict)
    seen_bits: dict[str, int] = field(default_factory=dict)
    e2e: Op = field(default_factory=Op)

    def add(self, d: dict[str, Any]) -> None:
        """add folds one pod's `d` block in; a missing bitset makes the result inexact."""
        self.consumed += int(d.get("consumed", 0))
        self.duplicated += int(d.get("dup", 0))
        for k in ("produced", "lost", "unique", "unacked", "foreign"):
            self.pods_counts[k] = self.pods_counts.get(k, 0) + int(d.get(k, 0))
        if d.get("e2e"):
            self.e2e.add(d["e2e"])
        if self.produced_bits is None or "pb" not in d:
            self.produced_bits = None
            return
        for origin, enc in (d.get("pb") or {}).items():
            self.produced_bits[origin] = self.produced_bits.get(origin, 0) | decode_bits(enc)
        for origin, enc in (d.get("sb") or {}).items():
            bits = decode_bits(enc)
            cur = self.seen_bits.get(origin, 0)
            # A message claimed by two pods is a duplicate.
            self.duplicated += (cur & bits).bit_count()
            self.seen_bits[origin] = cur | bits

    def summary(self) -> dict[str, Any]:
        """summary: produced, consumed, unique, lost, duplicated, ... and whether they are exact."""
        out = {"consumed": self.consumed, "duplicated": self.duplicated}
        if self.produced_bits is None:
            c = self.pods_counts
            out.update(
                produced=c.get("produced", 0),
                unique=c.get("unique", 0),
                lost=c.get("lost", 0),
                unacknowledged=c.get("unacked", 0),
                foreign=c.get("foreign", 0),
                exact=False,
            )
            return out
        produced = unique = lost = unacked = foreign = 0
        for origin, p in self.produced_bits.items():
            s = self.seen_bits.get(origin, 0)
            produced += p.bit_count()
            lost += (p & ~s).bit_count()
            unacked += (s & ~p).bit_count()
            unique += (p & s).bit_count()
        for origin, s in self.seen_bits.items():
            if origin not in self.produced_bits:
                foreign += s.bit_count()
        out.update(produced=produced, unique=unique, lost=lost, unacknowledged=unacked, foreign=foreign, exact=True)
        return out


def parse(text: str, pod: str) -> dict[str, Any]:
    """parse reads one pod's termination message, raising MergeError naming the pod."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MergeError(f"pod {pod}: termination message is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(doc.get("ops"), dict):
        raise MergeError(f"pod {pod}: termination message is not a sluice-bench v1 summary")
    return doc


def merge(logs: list[dict[str, Any]], own_queues: bool = False) -> dict[str, Any]:
    """merge combines parsed termination logs into one result (the shape of status.results
    plus the window, roles and truncation notes). own_queues says every pod used queues
    no other pod touched (--pod-index): no message can then be seen by two pods, so the
    pods' own delivery counts add up exactly even when a log had to shed its bitsets."""
    if not logs:
        raise MergeError("no termination logs to merge")
    scenario = logs[0].get("scenario")
    ops: dict[str, Op] = {}
    delivery: Delivery | None = None
    roles = [0, 0, 0, 0, 0, 0]
    pods = dropped = 0
    start, end = logs[0].get("start", 0), logs[0].get("end", 0)
    trunc: set[str] = set()
    for i, log in enumerate(logs):
        if log.get("scenario") != scenario:
            raise MergeError(f"input {i + 1} is scenario {log.get('scenario')!r}, not {scenario!r}")
        pods += int(log.get("pods") or 1)
        dropped += int(log.get("dropped", 0))
        start, end = min(start, log.get("start", start)), max(end, log.get("end", end))
        r = list(log.get("roles") or [0] * 6)
        for j in (0, 2, 4):  # processes add up; workers per process stay
            roles[j] += int(r[j])
            roles[j + 1] = int(r[j + 1])
        for name, op in (log.get("ops") or {}).items():
            ops.setdefault(name, Op()).add(op)
        if log.get("d") is not None:
            delivery = delivery or Delivery()
            delivery.add(log["d"])
        trunc.update(log.get("trunc") or [])
    seconds = (end - start) / 1000
    out_ops = {name: op.summary(seconds) for name, op in sorted(ops.items())}
    ok = sum(o["ok"] for o in out_ops.values())
    result: dict[str, Any] = {
        "scenario": scenario,
        "pods": pods,
        "startUnixMs": start,
        "endUnixMs": end,
        "durationSeconds": round(seconds, 3),
        "roles": roles,
        "requests": sum(o["requests"] for o in out_ops.values()),
        "errors": sum(o["errors"] for o in out_ops.values()),
        "requestsPerSecond": round(ok / seconds, 3) if seconds > 0 else 0.0,
        # As sluice-bench's total: the worst operation's p99.
        "p99Ms": max((o["p99Ms"] for o in out_ops.values()), default=0.0),
        "dropped": dropped,
        "operations": out_ops,
        "truncated": sorted(trunc),
    }
    if delivery is not None:
        d = delivery.summary()
        if own_queues:
            d["exact"] = True
        result.update(d)
        result["e2eP99Ms"] = delivery.e2e.summary(0)["p99Ms"]
    else:
        result.update(produced=0, consumed=0, lost=0, duplicated=0, exact=True)
    return result
