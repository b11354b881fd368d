"""An in-memory stand-in for the calls kube.py offers (get, list_objects, apply,
delete), and the status patch Kopf hands to handlers: the unit tests run the
handlers end to end on it without a cluster."""

from __future__ import annotations

import base64
import copy
from typing import Any


class Store:
    """Objects by (kind, namespace, name)."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version = 0

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        o = self.objs.get((kind, ns, name))
        return copy.deepcopy(o) if o else None

    def list_objects(self, kind: str, ns: str, selector: str | None = None) -> list[dict[str, Any]]:
        """list_objects filters by an equality label selector (a=b,c=d), as the apiserver does."""
        want = dict(kv.split("=", 1) for kv in (selector or "").split(",") if kv)
        return [
            copy.deepcopy(o)
            for (k, n, _), o in self.objs.items()
            if k == kind and n == ns and all(o["metadata"].get("labels", {}).get(a) == b for a, b in want.items())
        ]

    def apply(self, obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        what = "updated" if key in self.objs else "created"
        if not obj["metadata"].get("uid"):
            # The apiserver gives every object a uid at creation and keeps it.
            uid = (self.objs.get(key) or {}).get("metadata", {}).get("uid") or "uid-{}-{}-{}".format(*key)
            obj = {**obj, "metadata": {**obj["metadata"], "uid": uid}}
        if obj["kind"] == "Secret" and "stringData" in obj:
            # The apiserver stores stringData base64-encoded under data.
            obj = {**obj, "data": {k: base64.b64encode(v.encode()).decode() for k, v in obj["stringData"].items()}}
        if obj["kind"] == "Secret":
            # Every write of a Secret gets a new resourceVersion, as on the apiserver.
            self.version += 1
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.objs[key] = copy.deepcopy(obj)
        return obj, what

    def patch(self, kind: str, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """patch is a JSON merge patch (RFC 7386) on a stored object."""

        def merge(into: dict[str, Any], upd: dict[str, Any]) -> None:
            for k, v in upd.items():
                if v is None:
                    into.pop(k, None)
                elif isinstance(v, dict) and isinstance(into.get(k), dict):
                    merge(into[k], v)
                else:
                    into[k] = copy.deepcopy(v)

        obj = self.objs[(kind, ns, name)]
        merge(obj, body)
        return copy.deepcopy(obj)

    def delete(self, kind: str, ns: str, name: str) -> bool:
        return self.objs.pop((kind, ns, name), None) is not None


class Patch:
    """Patch collects what a handler writes to the status."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {}
