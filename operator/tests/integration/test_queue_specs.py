"""Generated Queue specs: a Queue the apiserver accepts is one the operator can make the
server hold.

The Queue CRD promises to refuse at apply what the server would refuse (its comment says
its limits mirror the server's), so a spec that passes `kubectl apply` and is then
refused by the server leaves a Queue Rejected, or a subscription missing, for a mistake
apply could have named. Each case is a valid spec with one to three fields replaced by
a generated value on either side of a limit, or a hostile string (seeded by
SLUICE_SPECS_SEED, else at random, and named in every failure). It is applied with a
server-side dry run; when accepted, the operator's own sync_server runs it twice against
a real sluice-server on a real redis-server, and:

- the server takes the queue, its metadata and every subscription (no ServerError, no
  SubscriptionRejected), and then holds what the spec says;
- the second sync changes nothing (no subscription updated again);
- the Pool it names and each Secret it references could exist: a Pool of that name and
  a Secret of that name and key pass the dry run;
- a refused spec is refused with a message naming a spec field.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import config as kube_config

from sluice_operator import events
from sluice_operator.handlers import queue as queue_handler
from sluice_operator.handlers import subscriptions
from sluice_operator.serverapi import ServerAPI, ServerError

from ..support import Processes, server_stack
from .conftest import KUBECONFIG, could_exist, edge, hold_generated, kc, pick

SEED = int(os.environ.get("SLUICE_SPECS_SEED") or random.randrange(1 << 32))
CASES = 40  # each costs two or three kubectl calls and a few server calls
SECRET, KEY, VALUE = "signing", "secret", "s3cret-value"


def queue_name(rng: random.Random) -> str:
    """queue_name is a Zaqar queue name, or one a little off it."""
    alphabet = pick(rng, "abcXYZ019_.-", "abc-_ /:é\t?#%")
    return "".join(rng.choice(alphabet) for _ in range(pick(rng, 1, 5, 64, 65)))


def host(rng: random.Random) -> str:
    return pick(
        rng,
        "example.com",
        "hooks.example.com",
        "127.0.0.1",
        "[::1]",
        "[::1",
        "[fe80::1%25eth0]",
        "exa%41mple.com",
        "exa%zzmple.com",
        "h\x01st",
        "bü.example",
        "a_b",
        "user:pw@example.com",
        "@",
    )


def subscriber(rng: random.Random) -> str:
    """subscriber is a webhook URL or a mailto address as a user might write one, or
    with a fault (a bad escape, port, bracket or control character)."""
    if rng.random() < 0.25:
        local = pick(rng, "ops", "a.b+tag", "ops%zz", "o\x00ps", "a,b", "ops?x=1", "\u00e9")
        domain = pick(rng, "example.com", "b\x7fad", "ex%41.com", "exa mple", "[::1]")
        return f"{pick(rng, 'mailto:', 'MAILTO:', 'mailto://')}{local}@{domain}"
    scheme = pick(rng, "http", "https", "trust+http", "trust+https", "HTTP", "ftp")
    port = pick(rng, "", "", ":80", ":0", ":65535", ":65536", ":x", ":")
    path = pick(rng, "", "/", "/hook?x=1&y=%20#f", "/a%zz", "/\x7f", "/ü", "/a#%zz", "?q")
    return f"{scheme}://{host(rng)}{port}{path}"


def options(rng: random.Random) -> dict[str, Any]:
    """options are Zaqar subscription options: strings, numbers and nested values."""
    value = pick(rng, "x", "", 1, 1.5, 1e300, 2**63, -0.0, True, None, [1, "a"], {"n": {"m": 1}}, "é" * 40)
    key = pick(rng, "subject", "from", "x-sluice", "_internal", "a.b", "é", "")
    return {key: value}


def secret_ref(rng: random.Random) -> dict[str, str]:
    """secret_ref names the test's Secret, or another, or something no Secret could be."""
    name = pick(rng, SECRET, SECRET, "missing", "Signing", "a/b", "..", f"{SECRET}?x=1", " s", "s" * 254, "a.b")
    key = pick(rng, KEY, KEY, "other", "se cret", "a/b", "..", ".dot", "k" * 254)
    return {"name": name, "key": key}


def subscription(rng: random.Random) -> dict[str, Any]:
    sub: dict[str, Any] = {"subscriber": subscriber(rng)}
    if rng.random() < 0.5:
        sub["ttl"] = edge(rng, 60, 315360000)
    if rng.random() < 0.4:
        sub["options"] = options(rng)
    if rng.random() < 0.4:
        sub["secretRef"] = secret_ref(rng)
    return sub


def dead_letter(rng: random.Random, own: str) -> dict[str, Any]:
    dl: dict[str, Any] = {"queue": pick(rng, own, "dead", queue_name(rng)), "maxClaimCount": edge(rng, 1, 1000)}
    if rng.random() < 0.5:
        dl["messageTTL"] = edge(rng, 60, 1209600)
    return dl


# Each mutation replaces one field of a valid spec by a generated value.
MUTATIONS: dict[str, Callable[[random.Random, dict[str, Any]], None]] = {
    "name": lambda rng, spec: spec.update(name=queue_name(rng)),
    "pool": lambda rng, spec: spec.update(pool=pick(rng, "web", "Web", "a.b", "a/b", "../x", "w" * 41, "a_b", "-a")),
    "messageTTL": lambda rng, spec: spec.update(messageTTL=edge(rng, 60, 1209600)),
    "delay": lambda rng, spec: spec.update(delay=edge(rng, 0, 900)),
    "maxPostSize": lambda rng, spec: spec.update(maxPostSize=edge(rng, 1, pick(rng, 262144, 1048576))),
    "deadLetter": lambda rng, spec: spec.update(deadLetter=dead_letter(rng, spec["name"])),
    "subscriptions": lambda rng, spec: spec.update(
        subscriptions=[subscription(rng) for _ in range(pick(rng, 1, 1, 2, 3))]
    ),
}


def cases() -> Iterator[tuple[str, dict[str, Any]]]:
    """cases are CASES generated specs, each a valid one with one to three fields
    replaced (a subscription-only case first, so the subscription path is always run)."""
    rng = random.Random(SEED)
    for i in range(CASES):
        spec: dict[str, Any] = {"pool": "web", "name": f"q{i}"}
        fields = ["subscriptions"] if i == 0 else rng.sample(sorted(MUTATIONS), rng.randint(1, 3))
        for field in sorted(fields):
            MUTATIONS[field](rng, spec)
        yield f"seed {SEED} case {i}: {spec!r}", spec


@pytest.fixture(scope="module")
def specs_ns(dry_ns: str) -> str:
    """specs_ns holds the Secret the generated secretRefs may name; the operator's own
    Kubernetes client reads it, as in a reconcile."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": dry_ns}}
    kc("apply", "-f", "-", stdin=json.dumps({**secret, "stringData": {KEY: VALUE}}))
    kube_config.load_kube_config(config_file=str(KUBECONFIG))
    return dry_ns


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerAPI]:
    """pooled is the operator's own client for a real sluice-server with one registered
    redis-server shard, s0 (what a Pool's members are)."""
    tmp: pathlib.Path = tmp_path_factory.mktemp("specs")
    procs = Processes()
    try:
        stack = server_stack(procs, tmp, shards=1)
        api = ServerAPI(stack.base, stack.token)
        api.put_pool("s0", stack.shard_uris[0], 100)
        yield api
        api.close()
    finally:
        procs.stop()


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events go through kopf's queue, which only a running operator has."""
    monkeypatch.setattr(events, "info", lambda *a, **k: None)
    monkeypatch.setattr(events, "warn", lambda *a, **k: None)


def held(api: ServerAPI, ns: str, body: dict[str, Any]) -> str:
    """held runs an accepted Queue through the operator's sync_server twice: what went
    wrong, or "" when the server took it, holds what it says, and the second sync
    changed nothing."""
    spec = body["spec"]
    refs = [s["secretRef"] for s in spec.get("subscriptions") or [] if s.get("secretRef")]
    if problems := could_exist(ns, pools=[spec["pool"]], secrets=[(r["name"], r["key"]) for r in refs]):
        return f"accepted, but {problems}"
    try:
        got = queue_handler.sync_server(api, body, ["s0"])
    except ServerError as exc:
        return f"accepted, the server refuses it: {exc.status} {exc.title}: {exc.description}"
    project, qname = queue_handler.identity(body)
    try:
        rejected = [m for reason, m in got.subs.problems if reason != "SecretNotFound"]
        if rejected:
            return f"accepted, the server refuses a subscription: {rejected}"
        want = queue_handler.queue_metadata(spec)
        if queue_handler.metadata_changes(want, got.metadata) or got.metadata["_flavor"] != spec["pool"]:
            return f"the server holds {got.metadata}"
        # A second sync, with the status the first one wrote, changes nothing.
        fields = subscriptions.status_fields(got.subs, got.deliveries, [], 1, len(spec.get("subscriptions") or []))
        body["status"] = {"subscriptions": fields["subscriptions"]}
        updates: list[str] = []
        update = api.update_subscription
        api.update_subscription = lambda project, queue, sid, *a: updates.append(sid)  # type: ignore[method-assign]
        try:
            again = queue_handler.sync_server(api, body, ["s0"])
        finally:
            api.update_subscription = update  # type: ignore[method-assign]
        if updates or again.created or again.subs.managed != got.subs.managed:
            return f"a second sync updated {updates}, created {again.created}: {again.subs}"
        return ""
    finally:
        for sid in got.subs.managed.values():
            api.delete_subscription(project, qname, sid)
        api.delete_queue(project, qname)


def test_accepted_queue_specs_are_held_by_the_server(specs_ns: str, pooled: ServerAPI, quiet_events: None) -> None:
    hold_generated("Queue", specs_ns, cases(), lambda body: held(pooled, specs_ns, body))
