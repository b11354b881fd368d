"""Backends only the server can reach, and pods the restricted Pod Security
Standard admits: generated passwords (never in status), NetworkPolicies,
and the security context of every pod the operator builds."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import redis

from sluice_operator import probes
from sluice_operator.builders import benchmark, builtin, common, netpol, server, shard_settings, thirdparty
from sluice_operator.config import Config

from ..support import free_port, need_program, wait_port
from .conftest import make_pool
from .kube_double import Store
from .test_reconcile import cond, run_pool, store  # noqa: F401  (fixture)
from .zaqar_double import ZaqarDouble

PW = "pw-Abc_123-xyz"


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env", [])}


def test_builtin_redis_requires_the_generated_password(cfg: Config) -> None:
    pool = make_pool(provisioner="builtin", replicas=2)
    sts = builtin.statefulset(cfg, pool, 1)
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    ref = _env(c)[common.REDIS_PASSWORD_ENV]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "web-1-redis-auth", "key": "password"}
    script = c["command"][-1]
    # Primary and replica both require the password; replicas authenticate to pod 0.
    assert script.count("requirepass") == 2 and script.count("masterauth") == 2
    assert "--replicaof web-1-0.web-1-headless.shop.svc 6379" in script
    secret = builtin.password_secret(cfg, pool, 1, PW)
    assert secret["metadata"]["name"] == "web-1-redis-auth" and secret["stringData"] == {"password": PW}
    uri = builtin.shard_uri("redis", "web-1", "shop", 2, "p@ss/word")
    assert uri == "redis://:p%40ss%2Fword@web-1.shop.svc:6379/0"
    assert probes.endpoint(uri) == "web-1.shop.svc:6379"
    assert builtin.shard_uri("redis", "web-1", "shop", 1) == "redis://web-1.shop.svc:6379/0"


def test_builtin_catalog_and_server_share_the_catalog_password(cfg: Config) -> None:
    sts = server.catalog_statefulset(cfg, "shop", [])
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert _env(c)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == common.CATALOG_SECRET
    assert "requirepass" in c["command"][-1]
    dep = server.deployment(cfg, "shop", [])
    (sc,) = dep["spec"]["template"]["spec"]["containers"]
    names = [e["name"] for e in sc["env"]]
    # The kubelet expands $(CATALOG_PASSWORD) only from variables defined earlier.
    assert names.index("CATALOG_PASSWORD") < names.index("SLUICE_CATALOG") and names.index("SLUICE_STORE")
    env = _env(sc)
    assert env["SLUICE_CATALOG"]["value"] == "redis://:$(CATALOG_PASSWORD)@sluice-catalog.shop.svc:6379/0"
    assert env["SLUICE_STORE"]["value"] == "redis://:$(CATALOG_PASSWORD)@sluice-catalog.shop.svc:6379/1"
    ext = server.deployment(Config(catalog_uri="redis://cat.{namespace}:6379/0"), "shop", [])
    assert "CATALOG_PASSWORD" not in _env(ext["spec"]["template"]["spec"]["containers"][0])


@pytest.fixture
def redis_binary() -> str:
    return need_program("redis-server")


def test_redis_command_really_requires_the_password(cfg: Config, tmp_path, redis_binary: str) -> None:
    """The shell line the builders give Redis, run by sh against the real redis-server
    (its /tmp and /data pointed at a scratch directory, its port at a free one)."""
    port = free_port()
    line = common.redis_with_password(f"--port {port} --bind 127.0.0.1 --dir {tmp_path} --save ''")
    line = line.replace("/tmp/redis-auth.conf", f"{tmp_path}/redis-auth.conf")
    proc = subprocess.Popen(
        ["sh", "-c", line],
        env={"REDIS_PASSWORD": PW, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, 10)
        ok, msg = probes.probe(f"redis://127.0.0.1:{port}/0", 2.0)
        assert not ok and "AUTH" in msg.upper(), msg
        ok, msg = probes.probe(common.redis_uri("127.0.0.1", port, 0, PW), 2.0)
        assert ok, msg
        ok, _ = probes.probe(common.redis_uri("127.0.0.1", port, 0, "wrong"), 2.0)
        assert not ok
        # Not on the command line: other processes of the pod cannot read it with ps.
        cmdlines = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert PW not in cmdlines
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_builtin_redis_runs_with_the_shard_settings(cfg: Config, tmp_path, redis_binary: str) -> None:
    """The builtin shard's own shell line (pod 0), run by sh against the real redis-server:
    the shard settings, maxmemory from the container's memory limit among them, are valid
    redis-server arguments and take effect."""
    port = free_port()
    resources = {"limits": {"memory": "256Mi"}}
    sts = builtin.statefulset(cfg, make_pool(resources=resources), 0)
    line = sts["spec"]["template"]["spec"]["containers"][0]["command"][2]
    line = (
        line.replace("--port 6379", f"--port {port}")
        .replace("--bind 0.0.0.0", "--bind 127.0.0.1")
        .replace("--dir /data", f"--dir {tmp_path}")
        .replace("/tmp/redis-auth.conf", f"{tmp_path}/redis-auth.conf")
    )
    proc = subprocess.Popen(
        ["sh", "-c", line],
        env={"REDIS_PASSWORD": PW, "PATH": "/usr/bin:/bin", "HOSTNAME": "web-0-0"},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, 10)
        c = redis.Redis(port=port, password=PW)
        settings = common.redis_shard_settings(resources)
        assert len(settings) > len(shard_settings.REDIS_SHARD_SETTINGS)
        for name, value in settings:
            assert c.config_get(name)[name] == value
        assert c.config_get("maxmemory")["maxmemory"] == str(179 * 1024 * 1024)
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_builtin_pool_registers_with_the_password_and_never_shows_it(
    store: Store,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server_double = ZaqarDouble()
    try:
        cfg = Config(server_url_template=server_double.url, probe_timeout=0.5)
        store.apply(
            {
                "kind": "Secret",
                "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
                "stringData": {"token": server_double.state.token},
            }
        )
        pool = make_pool(provisioner="builtin", shards=1)
        pool["metadata"]["uid"] = "u1"
        store.apply(pool)
        probed: list[str] = []
        monkeypatch.setattr(probes, "probe", lambda uri, t, ca=None: (probed.append(uri) is None, "PONG"))
        p = run_pool(cfg, store)
        secret = store.get("Secret", "shop", "web-0-redis-auth")
        assert secret is not None
        password = (secret.get("stringData") or {}).get("password")
        assert password and len(password) >= 24
        registered = server_double.state.pools["web-0"]["uri"]
        assert registered == f"redis://:{password}@web-0.shop.svc:6379/0" and probed == [registered]
        assert password not in json.dumps(p["status"]), p["status"]
        assert cond(p, "Ready")["status"] == "True"
        # The catalog password Secret and the policies come with the server.
        assert store.get("Secret", "shop", common.CATALOG_SECRET) is not None
        for name in ("sluice-backends", "sluice-server", "sluice-catalog"):
            assert store.get("NetworkPolicy", "shop", name) is not None, name
        # Generated once: a second reconcile keeps the same password.
        run_pool(cfg, store)
        again = store.get("Secret", "shop", "web-0-redis-auth")
        assert again is not None and (again.get("stringData") or {}).get("password") == password
    finally:
        server_double.stop()


def _peers(policy: dict[str, Any]) -> list[dict[str, Any]]:
    (rule,) = policy["spec"]["ingress"]
    return rule.get("from", [])


def test_network_policies() -> None:
    cfg = Config(namespace="sluice-system", network_policy_cidrs=("10.0.0.5/32",))
    objs = {o["metadata"]["name"]: o for o in netpol.desired(cfg, "shop", [])}
    assert set(objs) == {"sluice-backends", "sluice-server", "sluice-catalog"}
    server_pods = {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "server"}}
    }
    operator_ns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sluice-system"}}}
    backends = objs["sluice-backends"]
    assert backends["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "backend"
    assert backends["spec"]["policyTypes"] == ["Ingress"]
    assert _peers(backends) == [
        server_pods,
        {
            "podSelector": {
                "matchLabels": {"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "backend"}
            }
        },
        operator_ns,
        {"ipBlock": {"cidr": "10.0.0.5/32"}},
    ]
    assert _peers(objs["sluice-catalog"]) == [server_pods, operator_ns, {"ipBlock": {"cidr": "10.0.0.5/32"}}]
    assert objs["sluice-catalog"]["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "catalog"
    # The server: its port, from anyone; its metrics port from the monitoring
    # namespace; nothing else.
    clients, scrapers = objs["sluice-server"]["spec"]["ingress"]
    assert clients == {"ports": [{"protocol": "TCP", "port": 8888}]}
    assert scrapers == {
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        "ports": [{"protocol": "TCP", "port": 9464}],
    }
    # Every selected pod is one the builders label so.
    assert (
        common.selector(builtin.statefulset(cfg, make_pool(), 0)["spec"]["template"]["metadata"]["labels"]).items()
        >= backends["spec"]["podSelector"]["matchLabels"].items()
    )
    # redis-operator's Redis and Sentinel pods carry the shard's labels (the
    # manager copies the CR's): the policy selects them, and lets the server
    # reach the sentinels and the shard's pods reach each other.
    (rule,) = backends["spec"]["ingress"]
    assert {p["port"] for p in rule["ports"]} == {builtin.REDIS_PORT, builtin.MONGO_PORT, thirdparty.SENTINEL_PORT}
    spec = {"backend": "redis", "provisioner": "redis-operator", "shards": 1, "replicas": 3}
    pool = {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": "p", "namespace": "shop", "uid": "u"},
        "spec": spec,
    }
    for cr in thirdparty.redis_objects(cfg, pool, 0):
        assert cr["metadata"]["labels"].items() >= backends["spec"]["podSelector"]["matchLabels"].items(), cr["kind"]
    assert not netpol.desired(Config(network_policies=False), "shop", [])
    assert "sluice-catalog" not in {o["metadata"]["name"] for o in netpol.desired(Config(catalog_uri="x"), "s", [])}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What the restricted Pod Security Standard (v1.30) would refuse in a pod spec."""
    out = []
    psc = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(key)
    for v in pod.get("volumes") or []:
        allowed = {
            "configMap",
            "csi",
            "downwardAPI",
            "emptyDir",
            "ephemeral",
            "persistentVolumeClaim",
            "projected",
            "secret",
            "name",
        }
        if set(v) - allowed:
            out.append(f"volume {v['name']}: {set(v) - allowed}")
    for c in (pod.get("initContainers") or []) + pod["containers"]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation")
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"{name}: capabilities not dropped")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities added")
        if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile")
        if c.get("ports") and any(p.get("hostPort") for p in c["ports"]):
            out.append(f"{name}: hostPort")
        if sc.get("readOnlyRootFilesystem") is not True:  # ours, stricter than the standard
            out.append(f"{name}: readOnlyRootFilesystem")
    return out


def _pod_specs(cfg: Config) -> dict[str, dict[str, Any]]:
    redis_pool = make_pool(provisioner="builtin")
    mongo_pool = make_pool(provisioner="builtin", backend="mongodb", image="mongo:7", replicas=3)
    return {
        "builtin redis": builtin.statefulset(cfg, redis_pool, 0)["spec"]["template"]["spec"],
        "builtin mongodb": builtin.statefulset(cfg, mongo_pool, 0)["spec"]["template"]["spec"],
        "catalog": server.catalog_statefulset(cfg, "shop", [])["spec"]["template"]["spec"],
        "server": server.deployment(cfg, "shop", [])["spec"]["template"]["spec"],
    }


def test_every_pod_passes_the_restricted_standard(cfg: Config) -> None:
    for what, pod in _pod_specs(cfg).items():
        assert restricted_violations(pod) == [], what
    bad = dict(_pod_specs(cfg)["server"])
    bad["containers"] = [{**bad["containers"][0], "securityContext": {"privileged": True}}]
    assert "sluice-server: privileged" in restricted_violations(bad)  # the checker can fail


def test_benchmark_pods_pass_the_restricted_standard(cfg: Config) -> None:
    from .test_benchmark_builders import bench, pod_spec

    job = benchmark.job(cfg, bench(), 1, "2026-01-01T00:00:00Z", 10)
    assert restricted_violations(pod_spec(job)) == []
