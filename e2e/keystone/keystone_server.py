"""The real OpenStack Keystone (v3, fernet tokens, SQLite) on loopback, set
up the way an operator does: keystone-manage db_sync, fernet_setup and
bootstrap, then its public WSGI app (wsgi_runner.py). Keystone lives in a
venv of its own (make venv-keystone: build/venv-keystone), since its pins
differ from the compatibility venv's; the tests drive it over HTTP only.

users() creates what the tests need through Keystone's own API: two tenant
projects with a member each, and a service user holding the "service" role
(which Keystone's policy requires to validate other users' tokens).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testsupport"))
from harness import ROOT, Process, ProcessError  # noqa: E402

VENV = Path(os.environ.get("KEYSTONE_VENV", ROOT / "build" / "venv-keystone"))
ADMIN_PASSWORD = "keystone-admin-pw"

CONF_TEMPLATE = """\
[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///{db}
[token]
provider = fernet
expiration = 3600
[fernet_tokens]
key_repository = {fernet}
[fernet_receipts]
key_repository = {receipts}
[credential]
key_repository = {credential}
[cache]
enabled = false
"""


def available() -> bool:
    return (VENV / "bin" / "keystone-manage").is_file()


class KeystoneServer(Process):
    """One Keystone with its own SQLite database and key repositories."""

    name = "keystone"

    def __init__(self, workdir: Path, policy: dict[str, str] | None = None):
        """policy overrides rules of Keystone's default policy (oslo.policy)."""
        super().__init__(workdir)
        self.conf = self.workdir / "keystone.conf"
        self.policy = policy or {}
        self._prepared = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v3"

    def command(self) -> list[str]:
        return [str(VENV / "bin" / "python"), str(Path(__file__).with_name("wsgi_runner.py")),
                str(self.port)]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["OS_KEYSTONE_CONFIG_FILES"] = str(self.conf)
        env["PYTHONWARNINGS"] = "ignore"
        return env

    def _manage(self, *args: str) -> None:
        import subprocess

        with open(self.log_path, "ab") as log:
            rc = subprocess.call([str(VENV / "bin" / "keystone-manage"), "--config-file", str(self.conf), *args],
                                 stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, env=self.env())
        if rc != 0:
            raise self.fail(f"keystone-manage {args[0]} exited with {rc}")

    def prepare(self) -> None:
        """Create the database, the keys and the admin user, once."""
        if not available():
            raise ProcessError(f"{VENV} has no Keystone (make venv-keystone)")
        dirs = {k: self.workdir / k for k in ("fernet", "receipts", "credential")}
        for d in dirs.values():
            d.mkdir(exist_ok=True)
        conf = CONF_TEMPLATE.format(db=self.workdir / "keystone.db", **{k: str(v) for k, v in dirs.items()})
        if self.policy:
            policy_file = self.workdir / "policy.yaml"
            policy_file.write_text(json.dumps(self.policy))  # JSON is YAML
            conf += f"[oslo_policy]\npolicy_file = {policy_file}\n"
        self.conf.write_text(conf)
        user, group = os.getuid(), os.getgid()
        import grp
        import pwd

        owner = ["--keystone-user", pwd.getpwuid(user).pw_name, "--keystone-group", grp.getgrgid(group).gr_name]
        self._manage("db_sync")
        self._manage("fernet_setup", *owner)
        self._manage("bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                     "--bootstrap-public-url", self.url, "--bootstrap-region-id", "RegionOne")
        self._prepared = True

    def start(self) -> None:
        if not self._prepared:
            self.prepare()
        self.spawn()
        self.wait_http("/v3", timeout=60)

    # --- Keystone's API, enough to set up users and tokens ---------------

    def call(self, method: str, path: str, token: str | None = None, body: dict | None = None,
             headers: dict | None = None) -> tuple[int, dict, dict]:
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("X-Auth-Token", token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), json.loads(raw) if raw else {}
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, dict(e.headers), json.loads(raw) if raw else {}

    def issue(self, user: str, password: str, project: str) -> tuple[str, str]:
        """A project-scoped token for user: (token, project id)."""
        status, headers, body = self.call("POST", "/auth/tokens", body={"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "domain": {"name": "Default"}, "password": password}}},
            "scope": {"project": {"name": project, "domain": {"name": "Default"}}}}})
        if status != 201:
            raise ProcessError(f"token for {user}@{project}: Keystone answered {status} {body}")
        return headers["X-Subject-Token"], body["token"]["project"]["id"]

    def revoke(self, token: str) -> None:
        status, _, body = self.call("DELETE", "/auth/tokens", token=token, headers={"X-Subject-Token": token})
        if status != 204:
            raise ProcessError(f"revoking a token: Keystone answered {status} {body}")

    def _create(self, admin: str, kind: str, doc: dict) -> str:
        status, _, body = self.call("POST", f"/{kind}s", token=admin, body={kind: doc})
        if status != 201:
            raise ProcessError(f"creating {kind} {doc.get('name')}: Keystone answered {status} {body}")
        return body[kind]["id"]

    def _role_id(self, admin: str, name: str) -> str:
        _, _, body = self.call("GET", f"/roles?name={name}", token=admin)
        if body.get("roles"):
            return body["roles"][0]["id"]
        return self._create(admin, "role", {"name": name})

    def add_user(self, admin: str, name: str, password: str, project: str, role: str) -> None:
        """Create project (if new) and user, and grant the role on it."""
        _, _, body = self.call("GET", f"/projects?name={project}", token=admin)
        pid = body["projects"][0]["id"] if body.get("projects") else \
            self._create(admin, "project", {"name": project, "domain_id": "default"})
        uid = self._create(admin, "user", {"name": name, "password": password, "domain_id": "default"})
        rid = self._role_id(admin, role)
        status, _, body = self.call("PUT", f"/projects/{pid}/users/{uid}/roles/{rid}", token=admin)
        if status not in (200, 204):
            raise ProcessError(f"granting {role} to {name}: Keystone answered {status} {body}")

    def admin_token(self) -> str:
        return self.issue("admin", ADMIN_PASSWORD, "admin")[0]

    def user_id(self, admin: str, name: str) -> str:
        _, _, body = self.call("GET", f"/users?name={name}", token=admin)
        return body["users"][0]["id"]
