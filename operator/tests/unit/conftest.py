"""Shared fixtures: a Pool body as the apiserver hands it over (defaults applied)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluice_operator.config import Config

from ..support import BENCH, need_file


@pytest.fixture
def cfg() -> Config:
    return Config()


def make_pool(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "backend": "redis",
        "provisioner": "auto",
        "shards": 2,
        "replicas": 1,
        "weight": 100,
        "storage": {"size": "1Gi", "ephemeral": False},
        "placement": {"nodeClass": "metal", "policy": "required"},
    }
    base.update(copy.deepcopy(spec))
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "generation": 3},
        "spec": base,
    }


@pytest.fixture
def pool() -> dict[str, Any]:
    return make_pool()


@pytest.fixture
def bench_exe(monkeypatch: pytest.MonkeyPatch) -> str:
    """The sluice-bench binary the operator runs to merge, judge and compare results,
    found as the operator finds it (SLUICE_OPERATOR_BENCH_BINARY)."""
    exe = need_file(BENCH, "make build-bench")
    monkeypatch.setenv("SLUICE_OPERATOR_BENCH_BINARY", exe)
    return exe
