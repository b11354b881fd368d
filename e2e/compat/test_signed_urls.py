"""Pre-signed URLs interoperate with the real Zaqar 23.0.1: both servers
share one secret key, a URL signed by either is honoured by the other, and
the unchanged python-zaqarclient signs a URL and uses it against sluice."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import TARGETS, make_client, need
from harness import BIN, SluiceServer
from parity import CID, OTHER_CID, exchange

SECRET = "compat-shared-secret"
SLUICE_TARGETS = [t for t in TARGETS if t != "zaqar"] or ["memory"]


@pytest.fixture(scope="module")
def zaqar(redis_server, tmp_path_factory):
    """The real Zaqar with [signed_url] secret_key set."""
    from zaqar_server import ZaqarServer

    proc = ZaqarServer(tmp_path_factory.mktemp("zaqar-signed"), redis_server.url(3),
                       extra_conf=f"\n[signed_url]\nsecret_key = {SECRET}\n")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module", params=SLUICE_TARGETS)
def sluice(request, tmp_path_factory):
    need((BIN / "sluice-server").is_file(), f"{BIN / 'sluice-server'} is missing (make build-server)")
    store = "memory"
    if request.param == "redis":
        store = request.getfixturevalue("redis_server").url(4)
    proc = SluiceServer(tmp_path_factory.mktemp("sluice-signed"), store,
                        extra_args=["--signed-url-secret", SECRET])
    proc.start()
    yield proc
    proc.stop()


def call(url, method, path, project=None, body=None, headers=None):
    """One request; returns (status, decoded body or None)."""
    hdrs = {"Client-ID": CID, "Content-Type": "application/json"}
    if project is not None:
        hdrs["X-Project-ID"] = project
    hdrs.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    status, _, doc = exchange(url + path, method, hdrs, data)
    return status, doc


def share(url, project, queue, body):
    status, doc = call(url, "POST", f"/v2/queues/{queue}/share", project, body)
    assert status == 200, (url, status, doc)
    return doc


def signed_headers(doc, **change):
    h = {"X-Project-ID": doc["project"], "URL-Signature": doc["signature"],
         "URL-Expires": doc["expires"], "URL-Methods": ",".join(doc["methods"]),
         "URL-Paths": ",".join(doc["paths"])}
    h.update(change)
    return h


@pytest.fixture
def names():
    return "proj-" + uuid.uuid4().hex[:8], "q-" + uuid.uuid4().hex[:8]


@pytest.mark.parametrize("body", [
    {"paths": ["messages", "claims", "subscriptions"], "methods": ["POST", "GET"],
     "expires": "2099-01-01T00:00:00"},
    {"paths": ["subscriptions"], "methods": ["DELETE", "HEAD", "PUT"], "expires": "2099-01-01T00:00:00Z"},
    # A zone and a fraction: both servers normalise to UTC seconds first.
    {"paths": ["messages"], "expires": "2099-06-30T23:30:00.75+02:00"},
])
def test_both_servers_sign_alike(zaqar, sluice, names, body):
    project, queue = names
    assert share(sluice.url, project, queue, body) == share(zaqar.url, project, queue, body)


def test_share_answers_like_zaqar(zaqar, sluice, names):
    project, queue = names
    for body in ({"paths": ["nope"]}, {"expires": "2000-01-01T00:00:00"}, {"ttl": 5},
                 {"expires": "1700000000"}):
        got = [call(u, "POST", f"/v2/queues/{queue}/share", project, body) for u in (sluice.url, zaqar.url)]
        assert got[0][0] == got[1][0] == 400, (body, got)
        assert got[0][1] == got[1][1], (body, got)
    # Zaqar signs PATCH, which no shared resource serves; sluice refuses it.
    assert call(zaqar.url, "POST", f"/v2/queues/{queue}/share", project, {"methods": ["PATCH"]})[0] == 200
    status, doc = call(sluice.url, "POST", f"/v2/queues/{queue}/share", project, {"methods": ["PATCH"]})
    assert status == 400 and doc["description"].startswith("Invalid methods: {'PATCH'}"), doc


@pytest.mark.parametrize("signer", ["zaqar", "sluice"])
def test_url_signed_by_one_server_works_on_the_other(zaqar, sluice, names, signer):
    project, queue = names
    by, on = (zaqar, sluice) if signer == "zaqar" else (sluice, zaqar)
    assert call(on.url, "POST", f"/v2/queues/{queue}/messages", project,
                {"messages": [{"ttl": 300, "body": {"n": 1}}]})[0] == 201
    doc = share(by.url, project, queue, {"paths": ["messages"], "methods": ["GET", "POST"],
                                         "expires": "2099-01-01T00:00:00"})
    h = signed_headers(doc, **{"Client-ID": OTHER_CID})
    status, listed = call(on.url, "GET", f"/v2/queues/{queue}/messages", headers=h)
    assert status == 200 and [m["body"] for m in listed["messages"]] == [{"n": 1}], listed
    mid = listed["messages"][0]["id"]
    assert call(on.url, "GET", f"/v2/queues/{queue}/messages/{mid}", headers=h)[0] == 200
    assert call(on.url, "POST", f"/v2/queues/{queue}/messages", body={"messages": [{"body": 2}]},
                headers=h)[0] == 201
    # What the signature does not cover is refused, by both servers alike.
    refused = [
        ("DELETE", f"/v2/queues/{queue}/messages/{mid}", h),
        ("GET", f"/v2/queues/{queue}/messages", signed_headers(doc, **{"URL-Signature": "0000" + doc["signature"]})),
        ("GET", f"/v2/queues/{queue}/messages", signed_headers(doc, **{"X-Project-ID": "another"})),
        ("GET", f"/v2/queues/{queue}/messages", signed_headers(doc, **{"URL-Expires": "2099-01-02T00:00:00"})),
        ("GET", f"/v2/queues/{queue}-other/messages", h),
    ]
    for method, path, hdrs in refused:
        for server in (on, by):
            status, body = call(server.url, method, path, headers=hdrs)
            assert (status, body) == (404, {"title": "404 Not Found"}), (server.url, method, path, status, body)


def signed_client(url, doc):
    from zaqarclient.queues.v2 import client

    opts = {k: doc[k] for k in ("signature", "expires", "methods", "paths")}
    opts["os_project_id"] = doc["project"]
    return client.Client(url, version=2, conf={"auth_opts": {"backend": "signed-url", "options": opts}})


@pytest.mark.parametrize("signer", ["sluice", "zaqar"])
def test_zaqarclient_signed_url(zaqar, sluice, names, signer):
    """queue.signed_url() from the unchanged client, then a client that
    holds only the signed URL reads and posts, and nothing more."""
    from zaqarclient.transport import errors

    project, queue = names
    owner = make_client((sluice if signer == "sluice" else zaqar).url, project)
    q = owner.queue(queue, force_create=True)
    doc = q.signed_url(paths=["messages"], methods=["GET", "POST"], ttl_seconds=600)
    assert doc["paths"] == [f"/v2/queues/{queue}/messages"] and doc["methods"] == ["GET", "POST"]

    holder = signed_client(sluice.url, doc)
    hq = holder.queue(queue, auto_create=False)
    hq.post([{"ttl": 300, "body": {"from": "holder"}}])
    assert [m.body for m in hq.messages(echo=True)] == [{"from": "holder"}]
    with pytest.raises(errors.ResourceNotFound):
        hq.stats  # noqa: B018 - the property sends GET .../stats, not signed
    with pytest.raises(errors.ResourceNotFound):
        holder.queue(queue + "-other", auto_create=False).post([{"body": 1}])
