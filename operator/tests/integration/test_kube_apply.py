"""kube.apply against the real apiserver: what the operator changes in a desired
object reaches the live one (a ConfigMap's data, as the access grants the
server reads), and an unchanged one is left alone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import config as kconfig

from sluice_operator import kube

from .conftest import KUBECONFIG, kc


@pytest.fixture
def own_ns(cluster: None) -> Iterator[str]:
    kconfig.load_kube_config(config_file=str(KUBECONFIG))
    kube._API = None  # a client for this kubeconfig
    name = f"apply-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", name)
    yield name
    kc("delete", "namespace", name, "--wait=false", check=False)
    kube._API = None


def test_configmap_data_follows_the_desired_object(own_ns: str) -> None:
    def cm(data: dict[str, str]) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "grants", "namespace": own_ns},
            "data": data,
        }

    assert kube.apply(cm({"access.json": '{"grants": []}'}))[1] == "created"
    assert kube.apply(cm({"access.json": '{"grants": []}'}))[1] == "unchanged"
    live, what = kube.apply(cm({"access.json": '{"grants": [1]}'}))
    assert what == "updated" and live["data"] == {"access.json": '{"grants": [1]}'}
    # A key the operator no longer writes goes too: the data is the operator's.
    kube.apply(cm({"a": "1", "b": "2"}))
    assert kube.get("ConfigMap", own_ns, "grants")["data"] == {"a": "1", "b": "2"}
    kube.apply(cm({"a": "1"}))
    assert kube.get("ConfigMap", own_ns, "grants")["data"] == {"a": "1"}
