"""The Schedulable condition: the scheduler's own verdict on a Pool's pods,
plus the one cause users hit first, a class of nodes that does not exist."""

from __future__ import annotations

import re
from typing import Any


def shard_pods(pods: list[dict[str, Any]], shard_names: list[str]) -> list[dict[str, Any]]:
    """shard_pods picks the pods of the shards' StatefulSets (any provisioner names its
    StatefulSet after the shard, Sentinels add -sentinel)."""
    pats = [re.compile(rf"^{re.escape(s)}(-sentinel)?-\d+$") for s in shard_names]
    return [p for p in pods if any(r.match(p["metadata"]["name"]) for r in pats)]


def _scheduled(pod: dict[str, Any]) -> tuple[bool | None, str]:
    if pod.get("spec", {}).get("nodeName"):
        return True, ""
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return False, c.get("message") or c.get("reason") or "not scheduled"
    return None, ""


def schedulable(
    pods: list[dict[str, Any]], placement: dict[str, Any], label_key: str, class_nodes: int | None
) -> tuple[bool | None, str, str]:
    """schedulable returns (status, reason, message) for the Schedulable condition.
    class_nodes is how many nodes carry the placement's class label (None: not checked)."""
    node_class = placement.get("nodeClass", "metal")
    required = placement.get("policy", "preferred") == "required"
    unscheduled = [(p["metadata"]["name"], msg) for p in pods for ok, msg in [_scheduled(p)] if ok is False]
    if node_class != "any" and required and class_nodes == 0:
        msg = f"no node carries {label_key}={node_class} and placement.policy is required"
        if unscheduled:
            msg += f"; scheduler: {unscheduled[0][1]}"
        return False, "NoMatchingNodes", msg
    if unscheduled:
        name, why = unscheduled[0]
        more = f" (and {len(unscheduled) - 1} more)" if len(unscheduled) > 1 else ""
        return False, "Unschedulable", f"{name}{more}: {why}"
    if not pods:
        return None, "NoPods", "no backend pods yet"
    bound = sum(1 for p in pods if p.get("spec", {}).get("nodeName"))
    if bound < len(pods):
        return None, "Scheduling", f"{bound}/{len(pods)} pods bound to nodes"
    return True, "Scheduled", f"{bound}/{len(pods)} pods bound to nodes"
