"""The unchanged python-zaqarclient drives the server end to end."""

from __future__ import annotations

import uuid

import pytest
from zaqarclient.queues.v2 import message
from zaqarclient.transport import errors

BODIES = [{"event": "BackupStarted", "n": 1}, "plain string body", [1, 2, 3],
          {"event": "n4"}, 5]


def post_bodies(queue, bodies, ttl=300):
    res = queue.post([{"ttl": ttl, "body": b} for b in bodies])
    refs = res["resources"]
    assert len(refs) == len(bodies)
    prefix = f"/v2/queues/{queue.name}/messages/"
    assert all(r.startswith(prefix) for r in refs), refs
    return [r.rsplit("/", 1)[1] for r in refs]


def queue_names(client):
    it, _ = client.queues()
    return {q.name for q in it.stream()}


def test_ping(client):
    assert client.ping() is True


def test_queue_lifecycle_and_claim_cycle(client, other_client):
    """The issue's path: create, batch post, list, claim, claim update,
    delete with claim_id, stats, queue delete."""
    name = "life-" + uuid.uuid4().hex[:8]
    q = client.queue(name, force_create=True)
    assert name in queue_names(client)

    ids = post_bodies(q, BODIES)
    listed = list(other_client.queue(name, auto_create=False).messages())
    assert [m.id for m in listed] == ids
    assert [m.body for m in listed] == BODIES
    assert all(m.ttl == 300 and m.age >= 0 for m in listed)

    claim = q.claim(ttl=60, grace=60, limit=3)
    claimed = list(claim)
    assert claim.id, "claim id parsed from the message hrefs"
    assert [m.id for m in claimed] == ids[:3]
    assert all(m.claim_id == claim.id for m in claimed)

    claim.update(ttl=120, grace=90)
    assert q.claim(id=claim.id).ttl == 120
    stats = q.stats["messages"]
    assert (stats["claimed"], stats["free"], stats["total"]) == (3, 2, 5)

    for m in claimed:
        m.delete()  # sends ?claim_id=
    stats = q.stats["messages"]
    assert (stats["claimed"], stats["free"], stats["total"]) == (0, 2, 2)
    with pytest.raises(errors.ResourceNotFound):
        q.message(ids[0])

    rest = list(q.claim(ttl=60, grace=60))
    assert [m.id for m in rest] == ids[3:]
    for m in rest:
        m.delete()
    assert q.stats["messages"]["total"] == 0

    q.delete()
    assert name not in queue_names(client)


def test_claimed_messages_are_hidden_from_other_claims(queue):
    ids = post_bodies(queue, ["a", "b"])
    first = list(queue.claim(ttl=60, grace=60, limit=10))
    assert [m.id for m in first] == ids
    second = queue.claim(ttl=60, grace=60, limit=10)
    assert second.id is None and list(second) == []  # 204: nothing claimable


def test_claim_release_makes_messages_claimable(queue):
    ids = post_bodies(queue, ["a"])
    claim = queue.claim(ttl=60, grace=60)
    assert [m.id for m in claim] == ids
    claim.delete()
    with pytest.raises(errors.ResourceNotFound):
        queue.claim(id=claim.id).ttl
    assert [m.id for m in queue.claim(ttl=60, grace=60)] == ids


def test_claimed_message_needs_its_claim_id(queue):
    post_bodies(queue, ["locked"])
    msg = next(iter(queue.claim(ttl=60, grace=60)))
    # Zaqar's GET shows the claim in the message href; either way it is this one.
    assert queue.message(msg.id).claim_id in (None, msg.claim_id)
    bare = message.Message(queue, msg.ttl, msg.age, msg.body, id=msg.id,
                           href=msg.href.split("?")[0])
    with pytest.raises(errors.ForbiddenError):
        bare.delete()
    msg.delete()
    with pytest.raises(errors.ResourceNotFound):
        queue.message(msg.id)


def test_echo_hides_own_messages(queue, other_client):
    post_bodies(queue, ["mine"])
    assert list(queue.messages()) == []
    assert [m.body for m in queue.messages(echo=True)] == ["mine"]
    theirs = other_client.queue(queue.name, auto_create=False)
    assert [m.body for m in theirs.messages()] == ["mine"]


def test_listing_pages_follow_next_links(queue):
    bodies = list(range(15))
    post_bodies(queue, bodies)
    page = queue.messages(echo=True, limit=10)
    assert len(list(page)) == 10
    everything = queue.messages(echo=True, limit=4).stream()
    assert [m.body for m in everything] == bodies


def test_partial_page_still_links_to_next(queue):
    """Zaqar links a next page whenever a page has messages; zaqar-bench's
    observer reads the marker from that link and crashes without it."""
    ids = post_bodies(queue, ["a", "b", "c"])
    page = queue.messages(echo=True, limit=5)
    assert [m.id for m in page] == ids
    nexts = [link["href"] for link in page._links if link["rel"] == "next"]
    assert len(nexts) == 1, page._links
    follow = queue.client.follow(nexts[0])
    assert follow["messages"] == [] and follow["links"] == []


def test_marker_may_be_a_message_id(queue):
    """Zaqar's API reference defines the marker as the id of the last message
    seen, and clients that page by hand pass exactly that."""
    ids = post_bodies(queue, ["a", "b", "c"])
    # Not ids[0]: Zaqar's Redis driver treats the marker at rank 0 as absent.
    assert [m.id for m in queue.messages(echo=True, marker=ids[1])] == ids[2:]


def test_get_message_and_bulk_get(queue):
    ids = post_bodies(queue, ["x", "y", "z"])
    assert queue.message(ids[1]).body == "y"
    got = {m.id: m.body for m in queue.messages(ids[0], ids[2])}
    assert got == {ids[0]: "x", ids[2]: "z"}


def test_bulk_delete(queue):
    ids = post_bodies(queue, ["x", "y", "z"])
    queue.delete_messages(ids[0], ids[1])
    assert [m.id for m in queue.messages(echo=True)] == [ids[2]]


def test_pop_returns_oldest_and_removes_them(queue):
    post_bodies(queue, ["p1", "p2", "p3"])
    popped = list(queue.pop(count=2))
    assert [m.body for m in popped] == ["p1", "p2"]
    assert [m.body for m in queue.messages(echo=True)] == ["p3"]
    assert queue.stats["messages"]["total"] == 1


def test_metadata_roundtrip_and_reserved_defaults(queue):
    meta = queue.metadata(force_reload=True)
    assert meta["_default_message_ttl"] == 3600
    assert meta["_max_messages_post_size"] == 262144
    updated = queue.metadata(new_meta={"description": "compat", "_default_message_ttl": 120})
    assert updated["description"] == "compat"
    assert queue.metadata(force_reload=True)["_default_message_ttl"] == 120
    queue.post({"body": "default ttl"})  # no ttl: the queue's default applies
    assert [m.ttl for m in queue.messages(echo=True)] == [120]


def test_purge_removes_messages(queue):
    post_bodies(queue, ["a", "b"])
    queue.purge(resource_types=["messages"])
    assert queue.stats["messages"]["total"] == 0


def test_projects_are_isolated(server, client, queue):
    from conftest import make_client

    post_bodies(queue, ["secret"])
    stranger = make_client(server.url, "other-" + uuid.uuid4().hex[:8])
    assert queue.name not in queue_names(stranger)
    twin = stranger.queue(queue.name, auto_create=False)
    assert list(twin.messages(echo=True)) == []
    assert twin.stats["messages"]["total"] == 0
    assert queue.stats["messages"]["total"] == 1


def test_bad_requests_get_400(queue):
    with pytest.raises(errors.MalformedRequest):
        queue.post({"ttl": 1, "body": "ttl below the minimum of 60"})
    with pytest.raises(errors.MalformedRequest):
        queue.claim(ttl=60, grace=60, limit=21)
    with pytest.raises(errors.MalformedRequest):
        list(queue.pop(count=50))
    assert queue.stats["messages"]["total"] == 0
