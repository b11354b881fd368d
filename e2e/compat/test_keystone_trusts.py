"""trust+ subscribers against the real Keystone 30.0.0: sluice-server with
--auth keystone creates a Keystone trust from the subscribing user to its
service user and notifies with tokens of that trust, as Zaqar does.

test_trust_subscription mirrors zaqar-tempest-plugin's test of the same
name: the subscriber is sluice itself (another queue's messages endpoint,
post_data building a messages body from "$zaqar_message$"), so the message
can only arrive if the notification was authenticated, with a token acting
for the user on their project. The trust is in Keystone after the create
and gone after the delete (by another user of the project). A user whose roles Keystone's policy keeps from
delegating is refused with 403 and nothing is stored, in sluice or in
Keystone.

One Keystone (its policy lets only members create trusts) and one
sluice-server for the module.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from conftest import need
from harness import BIN, SluiceServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "keystone"))
from keystone_server import KeystoneServer, available  # noqa: E402

REVALIDATE = 2.0  # seconds: --keystone-revalidate
USERS = {  # name: (password, project, role)
    "alice": ("alice-pw", "tenant-a", "member"),
    "carol": ("carol-pw", "tenant-a", "reader"),
    "sluice": ("sluice-pw", "service", "service"),
}
# Keystone's default lets any user delegate; this one keeps readers out.
POLICY = {"identity:create_trust": "user_id:%(target.trust.trustor_user_id)s and role:member"}


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    need(available(), "the Keystone venv is missing (make venv-keystone)")
    ks = KeystoneServer(tmp_path_factory.mktemp("keystone-trusts"), policy=POLICY)
    ks.start()
    admin = ks.admin_token()
    for name, (pw, project, role) in USERS.items():
        ks.add_user(admin, name, pw, project, role)
    yield ks
    ks.stop()


@pytest.fixture(scope="module")
def sluice(keystone, tmp_path_factory):
    need((BIN / "sluice-server").is_file(), f"{BIN / 'sluice-server'} is missing (make build-server)")
    workdir = tmp_path_factory.mktemp("sluice-trusts")
    pw_file = workdir / "keystone-password"
    pw_file.write_text(USERS["sluice"][0] + "\n")
    proc = SluiceServer(workdir, "memory", extra_args=[
        "--auth", "keystone", "--keystone-url", keystone.url,
        "--keystone-username", "sluice", "--keystone-project", "service",
        "--keystone-password-file", str(pw_file),
        "--keystone-revalidate", f"{int(REVALIDATE * 1000)}ms",
        # Keystone answers in seconds on a loaded CI machine.
        "--keystone-timeout", "60s", "--delivery-timeout", "60s",
        "--delivery-retry-min", "200ms", "--delivery-retry-max", "2s"])
    proc.start()
    yield proc
    crashed = proc.proc.poll()
    proc.stop()
    assert crashed is None, f"sluice-server exited with {crashed}\n{proc.log_tail()}"
    assert "sluice-pw" not in proc.log_path.read_text(), "the service password reached the log"


class Zaqar:
    """Zaqar v2 over HTTP with one user's Keystone token."""

    def __init__(self, sluice, keystone, user: str):
        pw, project, _ = USERS[user]
        self.token, self.project = keystone.issue(user, pw, project)
        self.base = sluice.url + "/v2"
        self.client_id = str(uuid.uuid4())

    def call(self, method: str, path: str, body=None) -> requests.Response:
        return requests.request(method, self.base + path, json=body, timeout=120, headers={
            "X-Auth-Token": self.token, "Client-ID": self.client_id, "X-Project-ID": self.project})

    def must(self, status: int, method: str, path: str, body=None) -> dict:
        r = self.call(method, path, body)
        assert r.status_code == status, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else {}

    def messages(self, queue: str) -> list[dict]:
        r = self.call("GET", f"/queues/{queue}/messages?echo=true&limit=10")
        assert r.status_code in (200, 204), f"listing {queue}: {r.status_code} {r.text}"
        return r.json().get("messages", []) if r.content else []


def wait_for(what: str, cond, limit: float = 60.0):
    deadline = time.monotonic() + limit
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {limit:.0f}s")
        time.sleep(0.5)


def trust_subscription(z: Zaqar, sluice, source: str, sink: str) -> str:
    """tempest's subscription: post each notification into sink."""
    post_data = json.dumps({"messages": [{"body": "$zaqar_message$", "ttl": 60}]})
    post_headers = {"X-Project-ID": z.project, "Client-ID": str(uuid.uuid4())}
    body = {"ttl": 1200, "subscriber": f"trust+{sluice.url}/v2/queues/{sink}/messages",
            "options": {"post_data": post_data, "post_headers": post_headers}}
    return z.must(201, "POST", f"/queues/{source}/subscriptions", body)["subscription_id"]


def keystone_trust(keystone, trust_id: str) -> int:
    status, _, _ = keystone.call("GET", f"/OS-TRUST/trusts/{trust_id}", token=keystone.admin_token())
    return status


def test_trust_subscription(sluice, keystone):
    alice = Zaqar(sluice, keystone, "alice")
    source, sink = "trust-src-" + uuid.uuid4().hex[:6], "trust-dst-" + uuid.uuid4().hex[:6]
    alice.must(201, "PUT", f"/queues/{source}")
    sid = trust_subscription(alice, sluice, source, sink)

    sub = alice.must(200, "GET", f"/queues/{source}/subscriptions/{sid}")
    trust_id = sub["options"]["trust_id"]
    assert keystone_trust(keystone, trust_id) == 200, "the trust is not in Keystone"

    message = {"body": {"event": "created", "n": 1}, "ttl": 300}
    alice.must(201, "POST", f"/queues/{source}/messages", {"messages": [message]})
    got = wait_for("the notification in the sink queue", lambda: alice.messages(sink))
    # As tempest expects it: the message plus queue_name and Message_Type.
    assert [m["body"] for m in got] == [dict(message, queue_name=source, Message_Type="Notification")]
    stats = alice.must(200, "GET", f"/queues/{source}/deliveries")
    assert stats["delivered"] == 1 and stats["pending"] == 0, stats

    # Deleted by another user of the project, whom Keystone would not let
    # delete alice's trust: sluice deletes it with a token of the trust.
    Zaqar(sluice, keystone, "carol").must(204, "DELETE", f"/queues/{source}/subscriptions/{sid}")
    assert keystone_trust(keystone, trust_id) == 404, "the trust outlived its subscription"


def test_revoked_trust_is_not_used(sluice, keystone):
    """The notifications carry the trust's tokens: once Keystone deletes
    the trust, nothing reaches the sink, and the deliveries say why."""
    alice = Zaqar(sluice, keystone, "alice")
    source, sink = "trust-src-" + uuid.uuid4().hex[:6], "trust-dst-" + uuid.uuid4().hex[:6]
    sid = trust_subscription(alice, sluice, source, sink)
    trust_id = alice.must(200, "GET", f"/queues/{source}/subscriptions/{sid}")["options"]["trust_id"]
    alice.must(201, "POST", f"/queues/{source}/messages", {"messages": [{"body": 1, "ttl": 300}]})
    wait_for("the first notification", lambda: alice.messages(sink))

    status, _, body = keystone.call("DELETE", f"/OS-TRUST/trusts/{trust_id}", token=keystone.admin_token())
    assert status == 204, body
    # The receiving side (sluice) re-checks a token it validated after this.
    time.sleep(REVALIDATE + 0.5)
    alice.must(201, "POST", f"/queues/{source}/messages", {"messages": [{"body": 2, "ttl": 300}]})
    stats = wait_for("a failed attempt", lambda: (s := alice.must(200, "GET", f"/queues/{source}/deliveries"))
                     and s["last_error"] and "trust" in s["last_error"] and s)
    assert stats["pending"] == 1 and stats["delivered"] == 1, stats
    assert [m["body"]["body"] for m in alice.messages(sink)] == [1]
    alice.must(204, "DELETE", f"/queues/{source}/subscriptions/{sid}")


def test_trust_refused_stores_nothing(sluice, keystone):
    carol = Zaqar(sluice, keystone, "carol")
    queue = "trust-refused-" + uuid.uuid4().hex[:6]
    r = carol.call("POST", f"/queues/{queue}/subscriptions", {
        "subscriber": f"trust+{sluice.url}/v2/queues/elsewhere/messages", "ttl": 600})
    assert r.status_code == 403, r.text
    assert "identity:create_trust" in r.json()["description"], r.text
    assert carol.must(200, "GET", f"/queues/{queue}/subscriptions") == {"subscriptions": [], "links": []}
    admin = keystone.admin_token()
    carol_id = keystone.user_id(admin, "carol")
    status, _, body = keystone.call("GET", f"/OS-TRUST/trusts?trustor_user_id={carol_id}", token=admin)
    assert status == 200 and body["trusts"] == [], body
    # A plain subscriber needs no trust: carol may subscribe one.
    carol.must(201, "POST", f"/queues/{queue}/subscriptions", {"subscriber": "http://127.0.0.1:9/hook"})
