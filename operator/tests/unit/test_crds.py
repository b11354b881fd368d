"""The CRDs: names, printer columns, and the schema's types, enums, ranges and
defaults, checked offline (the CEL rules are checked by the apiserver in the
integration suite)."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

CRDS = pathlib.Path(__file__).resolve().parents[3] / "crds"


def load(kind: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / f"sluice.dev_{kind}.yaml").read_text())


def to_jsonschema(node: Any) -> Any:
    """Drop Kubernetes extensions so jsonschema can check types, enums and ranges."""
    if isinstance(node, dict):
        out = {k: to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
        if node.get("x-kubernetes-int-or-string"):
            out.pop("anyOf", None)
            out["type"] = ["integer", "string"]
        return out
    if isinstance(node, list):
        return [to_jsonschema(v) for v in node]
    return node


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """Structural defaulting as the apiserver does it (defaults of absent fields, recursively)."""
    if schema.get("type") == "array" and isinstance(obj, list):
        return [apply_defaults(schema.get("items") or {}, o) for o in obj]
    if schema.get("type") != "object" or not isinstance(obj, dict):
        return obj
    for key, sub in (schema.get("properties") or {}).items():
        if key not in obj and "default" in sub:
            obj[key] = copy.deepcopy(sub["default"])
        if key in obj:
            obj[key] = apply_defaults(sub, obj[key])
    return obj


def spec_schema(kind: str) -> dict[str, Any]:
    return load(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def validate(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    schema = spec_schema(kind)
    spec = apply_defaults(schema, copy.deepcopy(spec))
    jsonschema.validate(spec, to_jsonschema(schema))
    return spec


@pytest.mark.parametrize("kind", ["pools", "queues", "benchmarks"])
def test_names_scope_and_category(kind: str) -> None:
    crd = load(kind)
    assert crd["metadata"]["name"] == f"{kind}.sluice.dev"
    spec = crd["spec"]
    assert spec["group"] == "sluice.dev" and spec["scope"] == "Namespaced"
    assert "sluice" in spec["names"]["categories"]
    assert spec["names"]["shortNames"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_short_names_are_unique() -> None:
    seen = [n for k in ("pools", "queues", "benchmarks") for n in load(k)["spec"]["names"]["shortNames"]]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    "kind,columns",
    [
        ("queues", ["Pool", "Ready", "Messages", "Age"]),
        ("benchmarks", ["Scenario", "Phase", "Req/s", "p99", "Lost", "Verdict", "Age"]),
        ("pools", ["Backend", "Shards", "Ready", "Phase", "Age"]),
    ],
)
def test_printer_columns(kind: str, columns: list[str]) -> None:
    got = [c["name"] for c in load(kind)["spec"]["versions"][0]["additionalPrinterColumns"] if not c.get("priority")]
    assert [c for c in got if c in columns] == columns


def _walk(node: dict[str, Any], path: str = "") -> list[str]:
    """Every schema node must have a type (structural schema) unless it is int-or-string or preserves unknowns."""
    bad = []
    if (
        "type" not in node
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        bad.append(path or "/")
    for key, sub in (node.get("properties") or {}).items():
        bad += _walk(sub, f"{path}/{key}")
    if isinstance(node.get("items"), dict):
        bad += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        bad += _walk(node["additionalProperties"], f"{path}{{}}")
    return bad


@pytest.mark.parametrize("kind", ["pools", "queues", "benchmarks"])
def test_schema_is_structural(kind: str) -> None:
    root = load(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _walk(root) == []


def test_pool_defaults() -> None:
    spec = validate("pools", {"backend": "redis"})
    assert spec["provisioner"] == "auto"
    assert spec["shards"] == 1 and spec["replicas"] == 1 and spec["weight"] == 100
    assert spec["placement"] == {"nodeClass": "metal", "policy": "preferred"}
    assert spec["storage"] == {"size": "1Gi", "ephemeral": False}


@pytest.mark.parametrize(
    "spec,needle",
    [
        ({"backend": "cassandra"}, "is not one of"),
        ({"backend": "redis", "shards": 0}, "less than the minimum"),
        ({"backend": "redis", "shards": 65}, "greater than the maximum"),
        ({"backend": "redis", "weight": -1}, "less than the minimum"),
        ({"backend": "redis", "placement": {"nodeClass": "gpu"}}, "is not one of"),
        ({"backend": "redis", "placement": {"policy": "maybe"}}, "is not one of"),
        ({"backend": "redis", "storage": {"size": "lots"}}, "does not match"),
        ({"shards": 2}, "'backend' is a required property"),
    ],
)
def test_pool_rejects(spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=needle):
        validate("pools", spec)


def test_queue_defaults_and_limits() -> None:
    spec = validate("queues", {"pool": "web"})
    assert (spec["messageTTL"], spec["delay"], spec["maxPostSize"], spec["deletionPolicy"]) == (
        3600,
        0,
        262144,
        "Delete",
    )
    for bad, needle in [
        ({"pool": "web", "messageTTL": 59}, "minimum"),
        ({"pool": "web", "delay": 901}, "maximum"),
        ({"pool": "web", "name": "has space"}, "does not match"),
        ({"pool": "web", "deletionPolicy": "Orphan"}, "is not one of"),
        ({"pool": "web", "deadLetter": {"queue": "dlq"}}, "'maxClaimCount' is a required property"),
        ({}, "'pool' is a required property"),
    ]:
        with pytest.raises(jsonschema.ValidationError, match=needle):
            validate("queues", bad)


@pytest.mark.parametrize(
    "subscriber,ok",
    [
        ("http://hooks.example/a", True),
        ("https://10.0.0.1:8443/hook?x=1", True),
        ("trust+https://hooks.example/a", False),
        ("trust+http://h/a", False),
        ("mailto:ops@example.com", True),
        ("not a url", False),
        ("email://x@example.com", False),
        ("ftp://files.example/x", False),
        ("http://", False),
        ("mailto:nobody", False),
        ("http://hooks.example/a b", False),
        ("trust+ftp://h/a", False),
    ],
)
def test_queue_subscriber_schemes(subscriber: str, ok: bool) -> None:
    spec = {"pool": "web", "subscriptions": [{"subscriber": subscriber}]}
    if ok:
        assert validate("queues", spec)["subscriptions"] == [{"subscriber": subscriber}]
    else:
        with pytest.raises(jsonschema.ValidationError, match="does not match"):
            validate("queues", spec)


def test_queue_subscription_limits() -> None:
    good = {"subscriber": "http://h/a", "ttl": 60, "options": {"a": [1]}, "secretRef": {"name": "s", "key": "k"}}
    assert validate("queues", {"pool": "web", "subscriptions": [good]})["subscriptions"] == [good]
    for bad, needle in [
        ({"subscriber": "http://h/a", "ttl": 59}, "minimum"),
        ({"subscriber": "http://h/a", "options": "x"}, "is not of type 'object'"),
        ({"subscriber": "http://h/a", "secretRef": {"name": "s"}}, "'key' is a required property"),
        ({"ttl": 60}, "'subscriber' is a required property"),
        # the signing secret belongs in a Secret named by secretRef, never in the spec
        ({"subscriber": "http://h/a", "options": {"secret": "s"}}, "should not be valid under"),
    ]:
        with pytest.raises(jsonschema.ValidationError, match=needle):
            validate("queues", {"pool": "web", "subscriptions": [bad]})
    items = spec_schema("queues")["properties"]["subscriptions"]
    assert items["x-kubernetes-list-map-keys"] == ["subscriber"]  # one entry per subscriber


def test_queue_name_immutable_rule_present() -> None:
    rules = spec_schema("queues")["x-kubernetes-validations"]
    assert any("self.name == oldSelf.name" in r["rule"] and "immutable" in r["message"] for r in rules)


def test_benchmark_defaults_and_scenarios() -> None:
    spec = validate("benchmarks", {"scenario": "task-distribution"})
    assert spec["parallelism"] == 1 and spec["target"] == {}
    assert spec["placement"]["nodeClass"] == "metal" and spec["placement"]["avoidTargets"] is True
    custom = validate("benchmarks", {"scenario": "custom", "custom": {"producers": {}}})
    assert custom["custom"]["producers"] == {"processes": 1, "workers": 10}
    assert custom["custom"]["duration"] == 60
    with pytest.raises(jsonschema.ValidationError, match="is not one of"):
        validate("benchmarks", {"scenario": "everything"})
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        validate("benchmarks", {"scenario": "flood", "target": {"url": "ftp://x"}})


def test_benchmark_move_defaults_and_bounds() -> None:
    spec = validate("benchmarks", {"scenario": "task-distribution", "move": {"pool": "web-1"}})
    assert spec["move"] == {"pool": "web-1", "afterSeconds": 2, "timeoutSeconds": 120}
    ref = validate("benchmarks", {"scenario": "auditing", "move": {"pool": "p", "adminTokenSecretRef": {"name": "a"}}})
    assert ref["move"]["adminTokenSecretRef"] == {"name": "a", "key": "token"}
    for bad, needle in (
        ({}, "'pool' is a required property"),
        ({"pool": ""}, "should be non-empty|is too short"),
        ({"pool": "p", "afterSeconds": -1}, "less than the minimum"),
        ({"pool": "p", "timeoutSeconds": 0}, "less than the minimum"),
        ({"pool": "p", "timeoutSeconds": 3601}, "greater than the maximum"),
        ({"pool": "p", "adminTokenSecretRef": {}}, "'name' is a required property"),
    ):
        with pytest.raises(jsonschema.ValidationError, match=needle):
            validate("benchmarks", {"scenario": "task-distribution", "move": bad})
    rules = [r["rule"] for r in spec_schema("benchmarks")["x-kubernetes-validations"]]
    assert any("self.move.afterSeconds < (has(self.duration) ? self.duration" in r for r in rules)


def test_crd_reference_is_current() -> None:
    from sluice_operator import crddoc

    doc = CRDS.parent / "docs" / "crds.md"
    assert doc.read_text() == crddoc.render(CRDS), "docs/crds.md is stale: run make crd-docs"
