"""Shared fixtures: a Pool body as the apiserver hands it over (defaults applied), and
a fresh operator process for every test as far as its Queue deletion memory goes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluice_operator.config import Config
from sluice_operator.handlers import queue as queue_handler

from ..support import BENCH, need_file


@pytest.fixture(autouse=True)
def queue_deletions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator remembers, per process, the uids of Queues whose server-side
    queue it deleted, and never reconciles them again. Tests reuse uids (fixed
    names, or addresses of freed objects), so each starts with that memory empty:
    a deletion in one test once silenced every reconcile of the next."""
    monkeypatch.setattr(queue_handler, "_DELETED", type(queue_handler._DELETED)())
    monkeypatch.setattr(queue_handler, "_LOCKS", {})


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
