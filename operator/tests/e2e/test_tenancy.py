"""Tenancy as `helm install` gives it, with real pods: a client pod authenticates
with its own projected ServiceAccount token through the unchanged
python-zaqarclient and uses its namespace's queues; a pod of another namespace
is refused them (403), unless a Queue's spec.access grants its ServiceAccount
that queue; no token is a 401, and so is a token made for another audience.
Encrypted queues keep bodies out of the shard's bytes."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ..integration.conftest import ROOT, apply, condition, get, kc, wait_for
from .conftest import server_url
from .test_pools import pool

CLIENT_IMAGE = "sluice.dev/zaqar-client:test"
TOKEN_DIR = "/var/run/secrets/sluice"

# Runs in the other namespace's pods: each line of output is one JSON result.
PROBE = r"""
import json, os, sys, urllib.error, urllib.request, uuid
url, project = sys.argv[1:3]
def call(method, path, token=None, body=None):
    hdr = {"Client-ID": str(uuid.uuid4()), "X-Project-ID": project, "Content-Type": "application/json"}
    if token is not None:
        hdr["X-Auth-Token"] = token
    req = urllib.request.Request(url + path, method=method, headers=hdr,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
own = open(os.environ["SLUICE_TOKEN_FILE"]).read().strip()
other = open(os.environ["OTHER_AUDIENCE_TOKEN_FILE"]).read().strip()
post = {"messages": [{"ttl": 300, "body": {"from": os.environ["POD_NAMESPACE"]}}]}
out = {
    "stats": call("GET", "/v2/queues/orders/stats", own),
    "post": call("POST", "/v2/queues/orders/messages", own, post),
    "listing": call("GET", "/v2/queues", own),
    "sibling": call("GET", "/v2/queues/invoices/stats", own),
    "no_token": call("GET", "/v2/queues/orders/stats"),
    "wrong_audience": call("GET", "/v2/queues/orders/stats", other),
}
print(json.dumps(out))
"""


def client_pod(ns: str, name: str, account: str, command: list[str]) -> dict[str, Any]:
    """client_pod runs `command` in the zaqar-client image as `account`, with that
    ServiceAccount's token projected for audience sluice (and one for another
    audience), on the real node."""
    tokens = [
        {"serviceAccountToken": {"audience": "sluice", "expirationSeconds": 3600, "path": "token"}},
        {"serviceAccountToken": {"audience": "not-sluice", "expirationSeconds": 3600, "path": "other-audience"}},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": account,
            "automountServiceAccountToken": False,
            "nodeSelector": {"sluice.dev/node-type": "real"},
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "client",
                    "image": CLIENT_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": command,
                    "env": [
                        {"name": "SLUICE_TOKEN_FILE", "value": f"{TOKEN_DIR}/token"},
                        {"name": "OTHER_AUDIENCE_TOKEN_FILE", "value": f"{TOKEN_DIR}/other-audience"},
                        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    ],
                    "volumeMounts": [{"name": "tokens", "mountPath": TOKEN_DIR, "readOnly": True}],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
            "volumes": [{"name": "tokens", "projected": {"sources": tokens}}],
        },
    }


def run_pod(pod: dict[str, Any], timeout: float = 120) -> str:
    """run_pod creates the pod, waits for it to end and returns its log; it must succeed."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    apply(pod)
    try:
        phase = wait_for(
            f"pod {ns}/{name} done",
            lambda: (p := get("pod", ns, name)) and p.get("status", {}).get("phase") in ("Succeeded", "Failed") and p,
            timeout=timeout,
            interval=1,
        )["status"]["phase"]
        log = kc("logs", "-n", ns, name).stdout
        assert phase == "Succeeded", f"pod {ns}/{name} {phase}:\n{log}"
        return log
    finally:
        kc("delete", "pod", "-n", ns, name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def other_ns() -> Iterator[str]:
    name = f"e2e-other-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", name)
    kc("create", "serviceaccount", "granted", "-n", name)
    yield name
    kc("delete", "namespace", name, "--wait=false")


def queue(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"pool": "tenancy", **spec},
    }


def ready(kind: str, ns: str, name: str) -> bool:
    return condition(get(kind, ns, name), "Ready").get("status") == "True"


def test_tenants_as_installed(ns: str, other_ns: str) -> None:
    apply(pool(ns, "tenancy", 1))
    apply(queue(ns, "orders", encrypted=True))
    apply(queue(ns, "invoices"))
    for q in ("orders", "invoices"):
        wait_for(f"Queue {q} Ready", lambda q=q: ready("queue", ns, q), timeout=240, interval=2)
    url = server_url(ns)
    svc_url = f"http://sluice-server.{ns}.svc:8888"

    # The namespace's own pod, through the unchanged client and its projected token.
    script = (ROOT / "operator/tests/e2e/zaqar_client_check.py").read_text()
    log = run_pod(client_pod(ns, "own-client", "default", ["-c", script, svc_url, ns, "orders"]))
    assert json.loads(log.strip().splitlines()[-1])["claimed"] == [1, 2], log

    # Another namespace's pod: refused the queues, whatever token it holds.
    def probe(account: str) -> dict[str, Any]:
        pod = client_pod(other_ns, f"probe-{account}-{uuid.uuid4().hex[:4]}", account, ["-c", PROBE, svc_url, ns])
        return json.loads(run_pod(pod).strip().splitlines()[-1])

    got = probe("default")
    for what in ("stats", "post", "listing", "sibling"):
        code, body = got[what]
        assert code == 403 and body["title"] == "Not authorized", (what, got[what])
    for what in ("no_token", "wrong_audience"):
        code, body = got[what]
        assert code == 401 and body["title"] == "Authentication required", (what, got[what])

    # A grant on orders lets the granted ServiceAccount use orders, and only orders.
    apply(queue(ns, "orders", encrypted=True, access=[{"namespace": other_ns, "serviceAccount": "granted"}]))
    deadline = time.monotonic() + 240  # the kubelet refreshes a mounted ConfigMap within about a minute
    while True:
        got = probe("granted")
        if got["stats"][0] == 200 or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert got["stats"][0] == 200 and got["post"][0] == 201, got
    assert got["listing"][0] == 403 and got["sibling"][0] == 403, got
    assert probe("default")["stats"][0] == 403

    # The encrypted queue's bodies are not in the shard's bytes, and read back;
    # the same probe finds the body of a queue without the flag.
    sealed, plain = f"sealed-{uuid.uuid4().hex}", f"plain-{uuid.uuid4().hex}"
    token = kc("create", "token", "default", "-n", ns, "--audience", "sluice", "--duration", "1h").stdout.strip()
    hdr = ["-H", f"X-Auth-Token: {token}", "-H", f"Client-ID: {uuid.uuid4()}", "-H", "Content-Type: application/json"]
    curl = ["curl", "-sf", "--max-time", "10", *hdr]
    for q, marker in (("orders", sealed), ("invoices", plain)):
        body = {"messages": [{"ttl": 300, "body": {"secret": marker}}]}
        subprocess.run([*curl, "-X", "POST", f"{url}/v2/queues/{q}/messages", "-d", json.dumps(body)], check=True)
        listing = subprocess.run([*curl, f"{url}/v2/queues/{q}/messages?echo=true"], check=True, capture_output=True)
        assert marker in listing.stdout.decode(), listing.stdout[:500]
    shard = kc("get", "pod", "-n", ns, "-l", "sluice.dev/pool=tenancy", "-o", "jsonpath={.items[0].metadata.name}")
    held = kc(
        "exec",
        "-n",
        ns,
        shard.stdout.strip(),
        "-c",
        "redis",
        "--",
        "sh",
        "-c",
        f'redis-cli -a "$REDIS_PASSWORD" --no-auth-warning --raw EVAL "{EVERY_VALUE}" 0',
    ).stdout
    assert plain in held, "the probe does not see a plaintext body: it proves nothing"
    assert sealed not in held, "an encrypted queue's body is in the shard"


# Every value the shard holds, whatever the key's type, one per line.
EVERY_VALUE = (
    "local out = {} "
    "for _, k in ipairs(redis.call('KEYS', '*')) do "
    "local t = redis.call('TYPE', k).ok "
    "if t == 'string' then out[#out + 1] = redis.call('GET', k) "
    "elseif t == 'hash' then for _, v in ipairs(redis.call('HVALS', k)) do out[#out + 1] = v end "
    "elseif t == 'list' then for _, v in ipairs(redis.call('LRANGE', k, 0, -1)) do out[#out + 1] = v end "
    "elseif t == 'set' then for _, v in ipairs(redis.call('SMEMBERS', k)) do out[#out + 1] = v end "
    "elseif t == 'zset' then for _, v in ipairs(redis.call('ZRANGE', k, 0, -1)) do out[#out + 1] = v end "
    "elseif t == 'stream' then for _, e in ipairs(redis.call('XRANGE', k, '-', '+')) do "
    "for _, v in ipairs(e[2]) do out[#out + 1] = v end end end end "
    "return table.concat(out, '\\n')"
)
