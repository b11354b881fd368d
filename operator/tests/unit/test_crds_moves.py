"""The Pool schema's parts for moving queues: spec.drain and spec.rebalance defaults
and bounds, and status blocks the operator writes that the apiserver keeps whole
(a field missing from a structural schema is pruned silently)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from sluice_operator.handlers import migration, rebalance

from .test_crds import load, validate


def status_schema() -> dict[str, Any]:
    return load("pools")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


def pruned(schema: dict[str, Any], obj: Any, path: str = "") -> list[str]:
    """pruned lists the fields of obj the schema does not declare (what the apiserver drops)."""
    if isinstance(obj, list):
        return [p for i, x in enumerate(obj) for p in pruned(schema.get("items") or {}, x, f"{path}[{i}]")]
    if not isinstance(obj, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    props = schema.get("properties") or {}
    out = [f"{path}.{k}" for k in obj if k not in props]
    return out + [p for k, v in obj.items() if k in props for p in pruned(props[k], v, f"{path}.{k}")]


def test_drain_and_rebalance_defaults() -> None:
    spec = validate("pools", {"backend": "redis"})
    assert spec["drain"] == {"migrateQueues": True, "maxInFlight": 2}
    assert spec["rebalance"] == {"enabled": False, "tolerancePercent": 20, "minMessages": 1000}


@pytest.mark.parametrize(
    "spec,needle",
    [
        ({"drain": {"maxInFlight": 0}}, "less than the minimum"),
        ({"drain": {"maxInFlight": 17}}, "greater than the maximum"),
        ({"drain": {"migrateQueues": "yes"}}, "is not of type 'boolean'"),
        ({"rebalance": {"tolerancePercent": 0}}, "less than the minimum"),
        ({"rebalance": {"tolerancePercent": 101}}, "greater than the maximum"),
        ({"rebalance": {"minMessages": -1}}, "less than the minimum"),
        ({"rebalance": {"enabled": 1}}, "is not of type 'boolean'"),
    ],
)
def test_drain_and_rebalance_bounds(spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=needle):
        validate("pools", {"backend": "redis", **spec})


def test_status_blocks_are_declared_field_by_field() -> None:
    block = migration.fresh("web-2", 1_800_000_000.0)
    migration._fail(block, ("shop", "q"), "refused", 1_800_000_000.0)
    block["inFlight"] = [migration._moving(("shop", "r"), {"state": "moving", "messages_moved": 3}, "web-0")]
    done = migration.finish(block, 1_800_000_100.0)
    moving = {"project": "shop", "queue": "q", "from": "web-0", "to": "web-1", "messages": 9}
    reb: dict[str, Any] = {"moves": 1, "moving": moving, "failed": None}
    rebalance._failed(reb, moving, "boom", 1_800_000_000.0)
    schema = status_schema()
    for status in ({"migration": block}, {"migration": done}, {"rebalance": reb}):
        assert pruned(schema, status) == [], status
    # The check sees what the apiserver would drop.
    assert pruned(schema, {"migration": {**block, "bogus": 1}}) == [".migration.bogus"]
