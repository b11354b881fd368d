"""Renders docs/crds.md from the CRD schemas in crds/, so the reference can
never drift from what the apiserver enforces (a unit test checks it is current).

    python -m sluice_operator.crddoc ../crds > ../docs/crds.md
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import yaml

ORDER = ("pools", "queues", "benchmarks")


def _type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    t = node.get("type", "object")
    if t == "array":
        return f"[]{_type(node.get('items') or {})}"
    if t == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type(node['additionalProperties'])}"
    return str(t)


def _rules(node: dict[str, Any]) -> str:
    out = []
    if "enum" in node:
        out.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "minimum" in node or "maximum" in node:
        out.append(f"{node.get('minimum', '')}..{node.get('maximum', '')}")
    if "minLength" in node or "maxLength" in node:
        out.append(f"length {node.get('minLength', 0)}..{node.get('maxLength', '')}")
    if "pattern" in node:
        out.append(f"pattern `{node['pattern']}`")
    if "default" in node and node["default"] not in ({},):
        out.append(f"default `{json.dumps(node['default'])}`")
    for rule in node.get("x-kubernetes-validations") or []:
        out.append(rule["message"])
    return "; ".join(out).replace("|", "\\|")


def _rows(node: dict[str, Any], path: str, required: set[str]) -> list[str]:
    rows = []
    for key, sub in (node.get("properties") or {}).items():
        p = f"{path}.{key}" if path else key
        desc = " ".join(str(sub.get("description", "")).split())
        req = "yes" if key in required else ""
        rows.append(f"| `{p}` | {_type(sub)} | {req} | {_rules(sub)} | {desc} |".replace("\n", " "))
        child = sub.get("items") if sub.get("type") == "array" else sub
        if isinstance(child, dict) and child.get("properties"):
            rows += _rows(child, p + ("[]" if sub.get("type") == "array" else ""), set(child.get("required") or []))
    return rows


def render(crd_dir: pathlib.Path) -> str:
    """render returns the Markdown reference of every CRD in crd_dir."""
    out = [
        "# CRD reference (sluice.dev/v1alpha1)",
        "",
        "Generated from `crds/` by `python -m sluice_operator.crddoc crds` (`make crd-docs`);",
        "do not edit by hand. Rules in the Constraints column are enforced by the",
        "apiserver at `kubectl apply` time, with the message shown.",
        "",
    ]
    for plural in ORDER:
        crd = yaml.safe_load((crd_dir / f"sluice.dev_{plural}.yaml").read_text())
        names = crd["spec"]["names"]
        version = crd["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        out += [
            f"## {names['kind']}",
            "",
            f"`kubectl get {plural}` (short names: {', '.join(names['shortNames'])}; category: "
            f"{', '.join(names['categories'])}). Columns: "
            + ", ".join(c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority"))
            + ".",
            "",
        ]
        # What the name may be: the CRD's own limits on metadata.name, and the rules on the
        # whole object (the only place a rule can see the name).
        naming = [f"- {rule['message']}" for rule in schema.get("x-kubernetes-validations") or []]
        name_node = ((schema["properties"].get("metadata") or {}).get("properties") or {}).get("name")
        if name_node:
            naming.insert(0, f"- `metadata.name`: {_rules(name_node)}")
        if naming:
            out += ["### metadata.name", "", *naming, ""]
        for part in ("spec", "status"):
            node = schema["properties"][part]
            out += [f"### {part}", ""]
            for rule in node.get("x-kubernetes-validations") or []:
                out.append(f"- {rule['message']}")
            if node.get("x-kubernetes-validations"):
                out.append("")
            out += ["| Field | Type | Required | Constraints | Description |", "|---|---|---|---|---|"]
            out += _rows(node, part, set(node.get("required") or []))
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "crds")))
