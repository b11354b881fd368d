"""The third-party operators' CRDs as their projects publish them: read from the
projects' Go modules, pinned with their checksums in upstream/go.mod and go.sum
(see upstream/README.md), fetched with `go mod download`."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from typing import Any

import yaml

HERE = pathlib.Path(__file__).resolve().parent / "upstream"

# module -> the CRD files in it the operator's objects are validated against.
FILES: dict[str, list[str]] = {
    "github.com/OT-CONTAINER-KIT/redis-operator": [
        "config/crd/bases/redis.redis.opstreelabs.in_redis.yaml",
        "config/crd/bases/redis.redis.opstreelabs.in_redisreplications.yaml",
        "config/crd/bases/redis.redis.opstreelabs.in_redissentinels.yaml",
    ],
    "github.com/mongodb/mongodb-kubernetes-operator": [
        "config/crd/bases/mongodbcommunity.mongodb.com_mongodbcommunity.yaml",
    ],
    "github.com/prometheus-operator/prometheus-operator": [
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
    ],
}


class Unavailable(Exception):
    """The modules could not be fetched (no Go toolchain, or no module proxy)."""


def module_dirs() -> dict[str, pathlib.Path]:
    """module_dirs downloads the pinned modules (a no-op once cached) and returns their directories."""
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        raise Unavailable("go not found")
    out = subprocess.run(
        [go, "mod", "download", "-json", *FILES],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    dirs: dict[str, pathlib.Path] = {}
    errors: list[str] = []
    for doc in _json_stream(out.stdout):
        if doc.get("Error"):
            errors.append(doc["Error"])
        elif doc.get("Dir"):
            dirs[doc["Path"]] = pathlib.Path(doc["Dir"])
    missing = sorted(set(FILES) - set(dirs))
    if missing or out.returncode != 0:
        raise Unavailable(f"go mod download {missing}: {'; '.join(errors) or out.stderr.strip()}")
    return dirs


def _json_stream(text: str) -> list[dict[str, Any]]:
    dec, pos, docs = json.JSONDecoder(), 0, []
    text = text.strip()
    while pos < len(text):
        doc, end = dec.raw_decode(text, pos)
        docs.append(doc)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return docs


def crds() -> list[dict[str, Any]]:
    """crds are the upstream CustomResourceDefinitions, unchanged."""
    dirs = module_dirs()
    out = []
    for mod, files in FILES.items():
        for f in files:
            for doc in yaml.safe_load_all((dirs[mod] / f).read_text()):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    out.append(doc)
    return out
