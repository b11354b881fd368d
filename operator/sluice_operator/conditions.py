"""Status conditions with observedGeneration (Kopf has no helper for them).
lastTransitionTime moves only when a condition's status changes."""

from __future__ import annotations

import datetime as dt
from typing import Any


def now() -> str:
    """now is the current time in the RFC 3339 form Kubernetes uses."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[dict[str, Any]] | None,
    ctype: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int | None,
    at: str | None = None,
) -> list[dict[str, Any]]:
    """set_condition returns a new list with condition `ctype` set; status None means Unknown."""
    text = "Unknown" if status is None else ("True" if status else "False")
    out = [dict(c) for c in (conditions or [])]
    for c in out:
        if c.get("type") == ctype:
            if c.get("status") != text:
                c["lastTransitionTime"] = at or now()
            c.update(status=text, reason=reason, message=message, observedGeneration=generation)
            return out
    out.append(
        {
            "type": ctype,
            "status": text,
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": at or now(),
        }
    )
    return out


def get_condition(conditions: list[dict[str, Any]] | None, ctype: str) -> dict[str, Any] | None:
    """get_condition finds a condition by type."""
    for c in conditions or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(conditions: list[dict[str, Any]] | None, ctype: str) -> bool:
    """is_true tells whether condition `ctype` has status True."""
    c = get_condition(conditions, ctype)
    return bool(c and c.get("status") == "True")


def write_status(patch: Any, old: dict[str, Any], new: dict[str, Any], touch: str | None = None) -> bool:
    """write_status puts into the patch only the status fields that changed, so a
    timer tick on a steady object writes nothing. `touch` names a timestamp field
    refreshed only along with a real change. Returns whether anything changed."""
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    if changed and touch:
        changed[touch] = now()
    for k, v in changed.items():
        patch.status[k] = v
    return bool(changed)
