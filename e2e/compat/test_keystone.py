"""sluice-server with --auth keystone, against the real Keystone 30.0.0 and
the unchanged python-zaqarclient using its Keystone auth options: tokens
issued by Keystone, the project and the admin role taken from the token,
another project's header refused, a revoked token refused once the
revalidation interval has passed, and Keystone down: 503 for a token the
server has not seen, while the tokens it has validated keep working.

The tests share one Keystone and one sluice-server and run in file order;
the last one stops Keystone.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from zaqarclient.queues.v2 import client as zclient
from zaqarclient.transport import errors

from conftest import need
from harness import BIN, SluiceServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "keystone"))
from keystone_server import KeystoneServer, available  # noqa: E402

REVALIDATE = 2.0  # seconds: --keystone-revalidate, the revocation delay
USERS = {  # name: (password, project, role)
    "alice": ("alice-pw", "tenant-a", "member"),
    "bob": ("bob-pw", "tenant-b", "member"),
    "sluice": ("sluice-pw", "service", "service"),
}


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    need(available(), "the Keystone venv is missing (make venv-keystone)")
    ks = KeystoneServer(tmp_path_factory.mktemp("keystone"))
    ks.start()
    admin = ks.admin_token()
    for name, (pw, project, role) in USERS.items():
        ks.add_user(admin, name, pw, project, role)
    yield ks
    ks.stop()


@pytest.fixture(scope="module")
def sluice(keystone, tmp_path_factory):
    need((BIN / "sluice-server").is_file(), f"{BIN / 'sluice-server'} is missing (make build-server)")
    workdir = tmp_path_factory.mktemp("sluice-keystone")
    pw_file = workdir / "keystone-password"
    pw_file.write_text(USERS["sluice"][0] + "\n")
    proc = SluiceServer(workdir, "memory", extra_args=[
        "--auth", "keystone", "--keystone-url", keystone.url,
        "--keystone-username", "sluice", "--keystone-project", "service",
        "--keystone-password-file", str(pw_file),
        "--keystone-revalidate", f"{int(REVALIDATE * 1000)}ms",
        # Keystone answers in seconds on a loaded CI machine.
        "--keystone-timeout", "60s"])
    proc.start()
    yield proc
    crashed = proc.proc.poll()
    proc.stop()
    assert crashed is None, f"sluice-server exited with {crashed}\n{proc.log_tail()}"
    assert "sluice-pw" not in proc.log_path.read_text(), "the service password reached the log"


def password_client(sluice, keystone, user: str):
    """zaqarclient authenticating itself with Keystone (it gets the token)."""
    pw, project, _ = USERS[user]
    return zclient.Client(sluice.url, version=2, conf={"auth_opts": {"backend": "keystone", "options": {
        "os_auth_url": keystone.url, "os_username": user, "os_password": pw,
        "os_project_name": project, "os_user_domain_name": "Default",
        "os_project_domain_name": "Default"}}})


def token_client(sluice, keystone, token: str, project_id: str | None = None):
    """zaqarclient with a token issued earlier (its os_auth_token option)."""
    opts = {"os_auth_token": token, "os_auth_url": keystone.url}
    if project_id:
        opts["os_project_id"] = project_id
    return zclient.Client(sluice.url, version=2, conf={"auth_opts": {"backend": "keystone", "options": opts}})


def names(client) -> set[str]:
    it, _ = client.queues()
    return {q.name for q in it.stream()}


def test_post_and_claim_with_keystone_tokens(sluice, keystone):
    alice = password_client(sluice, keystone, "alice")
    name = "ks-" + uuid.uuid4().hex[:8]
    q = alice.queue(name, force_create=True)
    q.post([{"ttl": 300, "body": {"n": i}} for i in range(3)])
    claim = q.claim(ttl=60, grace=60, limit=5)
    got = sorted(m.body["n"] for m in claim)
    assert got == [0, 1, 2]
    for m in claim:
        m.delete()
    # Bob's token names project tenant-b: alice's queue is not there.
    bob = password_client(sluice, keystone, "bob")
    assert name in names(alice)
    assert name not in names(bob)
    q.delete()


def test_no_or_bad_token_refused(sluice, keystone):
    with pytest.raises(errors.UnauthorizedError):
        names(token_client(sluice, keystone, "gAAAAAB-not-a-keystone-token"))


def test_token_of_another_project_refused(sluice, keystone):
    token, _ = keystone.issue("alice", USERS["alice"][0], USERS["alice"][1])
    _, tenant_b = keystone.issue("bob", USERS["bob"][0], USERS["bob"][1])
    with pytest.raises(errors.ForbiddenError):
        names(token_client(sluice, keystone, token, project_id=tenant_b))


def test_admin_role_grants_admin_api(sluice, keystone):
    admin = token_client(sluice, keystone, keystone.admin_token())
    assert admin.health() is not None
    with pytest.raises(errors.ForbiddenError):
        password_client(sluice, keystone, "alice").health()


def test_revoked_token_refused_after_interval(sluice, keystone):
    token, _ = keystone.issue("alice", USERS["alice"][0], USERS["alice"][1])
    c = token_client(sluice, keystone, token)
    names(c)  # validated and cached
    keystone.revoke(token)
    time.sleep(REVALIDATE + 0.5)
    with pytest.raises(errors.UnauthorizedError):
        names(c)


def test_keystone_down(sluice, keystone):
    seen, _ = keystone.issue("alice", USERS["alice"][0], USERS["alice"][1])
    unseen, _ = keystone.issue("bob", USERS["bob"][0], USERS["bob"][1])
    names(token_client(sluice, keystone, seen))
    keystone.stop()
    # Past the revalidation interval: the re-check fails to reach Keystone,
    # and the token, valid when last asked and not expired, still works.
    time.sleep(REVALIDATE + 0.5)
    names(token_client(sluice, keystone, seen))
    with pytest.raises(errors.ServiceUnavailableError):
        names(token_client(sluice, keystone, unseen))
