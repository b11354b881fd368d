"""Tenancy as deployed: the auth mode of every server the operator runs, the access
grants of Queue spec.access, the encryption keys, and the Benchmark pods' own
ServiceAccount tokens."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jsonschema
import pytest

from sluice_operator.builders import benchmark
from sluice_operator.builders import server as server_builder
from sluice_operator.config import Config, ConfigError
from sluice_operator.handlers import queue

from .kube_double import Store
from .test_crds import validate
from .test_subscriptions import events, put_queue, run, server, store  # noqa: F401  (fixtures)
from .zaqar_double import ZaqarDouble

P = "SLUICE_OPERATOR_"


def env_of(dep: dict[str, Any]) -> dict[str, Any]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def mounts_of(dep: dict[str, Any]) -> dict[str, str]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}


def test_default_mode_is_kubernetes() -> None:
    cfg = Config.from_env({})
    assert (cfg.auth_mode, cfg.auth_audience) == ("kubernetes", "sluice")
    dep = server_builder.deployment(cfg, "ns1", [])
    env = env_of(dep)
    assert env["SLUICE_AUTH"] == "kubernetes"
    assert env["SLUICE_KUBERNETES_AUDIENCE"] == "sluice"
    # The server reads the grants and the token-signing keys: its own token is mounted.
    assert env["SLUICE_ACCESS_FILE"].startswith(mounts_of(dep)["access"] + "/")
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    access = next(v for v in pod["volumes"] if v["name"] == "access")
    assert access["configMap"] == {"name": server_builder.ACCESS_CONFIGMAP, "optional": True}
    assert env["SLUICE_ENCRYPTION_KEY_FILE"].startswith(mounts_of(dep)["encryption"] + "/")


@pytest.mark.parametrize(
    "env,needle",
    [
        ({P + "AUTH_MODE": "open"}, "is not one of"),
        ({P + "AUTH_MODE": "kubernetes", P + "AUTH_AUDIENCE": " "}, "AUTH_AUDIENCE: required"),
        ({P + "AUTH_MODE": "keystone"}, "KEYSTONE_URL, SLUICE_OPERATOR_KEYSTONE_USERNAME"),
        (
            {
                P + "AUTH_MODE": "keystone",
                P + "KEYSTONE_URL": "http://ks:5000/v3",
                P + "KEYSTONE_USERNAME": "sluice",
                P + "KEYSTONE_PROJECT": "service",
            },
            "KEYSTONE_PASSWORD_SECRET: required",
        ),
        ({P + "AUTH_MODE": "tokens"}, "AUTH_TOKENS_SECRET: required"),
        ({P + "AUTH_MODE": "tokens", P + "AUTH_TOKENS_SECRET": "only-a-name"}, "is not secret-name/key"),
        ({P + "ENCRYPTION_KEY_SECRET": "a/b/c"}, "is not secret-name/key"),
    ],
)
def test_bad_auth_settings_are_refused(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Config.from_env(env)


def test_keystone_and_tokens_modes() -> None:
    ks = Config.from_env(
        {
            P + "AUTH_MODE": "keystone",
            P + "KEYSTONE_URL": "http://ks:5000/v3",
            P + "KEYSTONE_USERNAME": "sluice",
            P + "KEYSTONE_PROJECT": "service",
            P + "KEYSTONE_PASSWORD_SECRET": "ks-pass/password",
        }
    )
    dep = server_builder.deployment(ks, "ns1", [])
    env = env_of(dep)
    assert env["SLUICE_AUTH"] == "keystone"
    assert env["SLUICE_KEYSTONE_URL"] == "http://ks:5000/v3"
    assert env["SLUICE_KEYSTONE_USER_DOMAIN"] == "Default"
    # Not optional: a server without its credentials must not start unauthenticated.
    assert env["SLUICE_KEYSTONE_PASSWORD"] == {"secretKeyRef": {"name": "ks-pass", "key": "password"}}
    assert "SLUICE_ACCESS_FILE" not in env and "access" not in mounts_of(dep)
    assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    tok = Config.from_env({P + "AUTH_MODE": "tokens", P + "AUTH_TOKENS_SECRET": "toks/tokens"})
    assert env_of(server_builder.deployment(tok, "ns1", []))["SLUICE_AUTH_TOKENS"] == {
        "secretKeyRef": {"name": "toks", "key": "tokens"}
    }
    none = Config.from_env({P + "AUTH_MODE": "none"})
    assert env_of(server_builder.deployment(none, "ns1", []))["SLUICE_AUTH"] == "none"


def test_named_encryption_secret_is_mounted_instead_of_the_generated_one() -> None:
    cfg = Config.from_env({P + "ENCRYPTION_KEY_SECRET": "my-keys/current"})
    pod = server_builder.deployment(cfg, "ns1", [])["spec"]["template"]["spec"]
    vol = next(v for v in pod["volumes"] if v["name"] == "encryption")
    assert vol["secret"] == {
        "secretName": "my-keys",
        "items": [{"key": "current", "path": server_builder.ENCRYPTION_KEY}],
    }


def q(obj: str, created: str, access: list[dict[str, str]], **spec: Any) -> dict[str, Any]:
    meta = {"name": obj, "namespace": "team", "uid": "u-" + obj, "creationTimestamp": created}
    return {"metadata": meta, "spec": {"pool": "p", "access": access, **spec}}


def test_access_grants_come_from_each_queues_owner() -> None:
    a = [{"namespace": "web", "serviceAccount": "api"}, {"namespace": "batch", "serviceAccount": "worker"}]
    queues = [
        q("jobs", "2026-01-01T00:00:00Z", a),
        # A later Queue naming the same server-side queue is in Conflict: it grants nothing.
        q("jobs-again", "2026-01-02T00:00:00Z", [{"namespace": "evil", "serviceAccount": "x"}], name="jobs"),
        q("other", "2026-01-01T00:00:00Z", [], project="shared"),
        {
            **q("gone", "2026-01-01T00:00:00Z", a),
            "metadata": {**q("gone", "", a)["metadata"], "deletionTimestamp": "x"},
        },
        q("events", "2026-01-01T00:00:00Z", [a[0], a[0]], project="shared"),
    ]
    queues[3]["metadata"]["deletionTimestamp"] = "2026-01-03T00:00:00Z"
    assert queue.access_grants(queues) == [
        {"project": "shared", "queue": "events", "serviceAccounts": ["web/api"]},
        {"project": "team", "queue": "jobs", "serviceAccounts": ["batch/worker", "web/api"]},
    ]
    cm = server_builder.access_configmap(Config(), "team", queue.access_grants(queues), [])
    assert json.loads(cm["data"][server_builder.ACCESS_KEY])["grants"][1]["queue"] == "jobs"


def test_queue_spec_encrypted_and_access_schema() -> None:
    assert queue.queue_metadata({"pool": "p", "encrypted": True})["_enable_encrypt_messages"] is True
    assert "_enable_encrypt_messages" not in queue.queue_metadata({"pool": "p"})
    good = {"pool": "p", "encrypted": True, "access": [{"namespace": "web", "serviceAccount": "api.v2"}]}
    assert validate("queues", good)["access"] == good["access"]
    for bad, needle in [
        ({"pool": "p", "encrypted": "yes"}, "is not of type 'boolean'"),
        ({"pool": "p", "access": [{"namespace": "web"}]}, "'serviceAccount' is a required property"),
        ({"pool": "p", "access": [{"namespace": "Web", "serviceAccount": "a"}]}, "does not match"),
    ]:
        with pytest.raises(jsonschema.ValidationError, match=needle):
            validate("queues", bad)


def bench_body(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": "team", "uid": "u", "generation": 1},
        "spec": {"scenario": "task-distribution", "parallelism": 1, **spec},
    }


def test_benchmark_pods_send_their_own_projected_token() -> None:
    job = benchmark.job(Config(), bench_body(), 1, "2026-01-01T00:00:00Z", 5)
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = c["args"]
    assert args[args.index("--token-file") + 1] == benchmark.TOKEN_DIR + "/token"
    (vol,) = [v for v in pod["volumes"] if v["name"] == "sluice-token"]
    (src,) = vol["projected"]["sources"]
    assert src["serviceAccountToken"]["audience"] == "sluice"
    assert {"name": "sluice-token", "mountPath": benchmark.TOKEN_DIR, "readOnly": True} in c["volumeMounts"]
    # The Kubernetes API token stays out of the pod: only the audience-bound one is there.
    assert pod["automountServiceAccountToken"] is False

    ref = bench_body(target={"tokenSecretRef": {"name": "t", "key": "token"}})
    args = benchmark.job(Config(), ref, 1, "2026-01-01T00:00:00Z", 5)["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert "--token" in args and "--token-file" not in args
    none = dataclasses.replace(Config(), auth_mode="none")
    pod = benchmark.job(none, bench_body(), 1, "2026-01-01T00:00:00Z", 5)["spec"]["template"]["spec"]
    assert "--token-file" not in pod["containers"][0]["args"] and "volumes" not in pod


def test_queue_reconcile_and_deletion_write_the_access_file(store: Store, server: ZaqarDouble) -> None:  # noqa: F811
    cfg = Config(server_url_template=server.url)
    put_queue(store)
    store.objs[("Queue", "shop", "orders")]["spec"]["access"] = [{"namespace": "web", "serviceAccount": "api"}]
    run(cfg, store)
    cm = store.get("ConfigMap", "shop", server_builder.ACCESS_CONFIGMAP)
    assert cm is not None and [o["kind"] for o in cm["metadata"]["ownerReferences"]] == ["Pool"]
    grants = json.loads(cm["data"][server_builder.ACCESS_KEY])["grants"]
    assert grants == [{"project": "shop", "queue": "orders", "serviceAccounts": ["web/api"]}]
    body = store.get("Queue", "shop", "orders")
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    store.objs[("Queue", "shop", "orders")] = body
    queue.delete(cfg, body, retry=0)
    cm = store.get("ConfigMap", "shop", server_builder.ACCESS_CONFIGMAP)
    assert json.loads(cm["data"][server_builder.ACCESS_KEY]) == {"grants": []}
