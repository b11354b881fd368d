"""Generated requests (request_cases.py) sent to sluice and to the real
Zaqar 23.0.1, compared. Each case runs in a project of its own, on a queue
set up the same way on both servers (three messages, the oldest claimed),
and is one to three requests in a row; both servers sign pre-signed URLs
with one secret.

Sluice never answers 5xx to any of them. Otherwise both must answer the
same status, and a success the same body shape (parity.shape), and after
the last step the queue's stats must count the same messages, unless the
difference is one docs/compat.md lists: KNOWN says which, each by a rule
over the case and the two answers. A difference no rule explains fails the
test with the case, so it can be replayed:

    PARITY_SEED=<seed> PARITY_CASES=<n> build/venv-compat/bin/python -m pytest \
        e2e/compat/test_generated_parity.py

The seed is fixed, so CI checks the same cases each run; other seeds
explore further.
"""

from __future__ import annotations

import json
import os
import random
import re
import urllib.parse

import pytest
from conftest import TARGETS, need
from harness import BIN, SluiceServer
from falcon.constants import FALSE_STRINGS
from parity import CID, Answer, Differences, exchange
from request_cases import Case, SignedCase, draw_signed, draw_steps, tampered
from zaqar.transport.validation import QUEUE_NAME_MAX_LEN, QUEUE_NAME_REGEX

SEED = int(os.environ.get("PARITY_SEED", "20261127"))
SECRET = "generated-parity-secret"
CASES = int(os.environ.get("PARITY_CASES", "600"))
SIGNED_CASES = int(os.environ.get("PARITY_SIGNED_CASES", "300"))
UNKNOWN_ID = "5c6939a8-ef2f-4e4a-9c4a-1a1a1a1a1a1a"
SLUICE_TARGETS = [t for t in TARGETS if t != "zaqar"] or ["memory"]


def send(url: str, project: str, method: str, path: str, query=(), body=None, has_body=False,
         raw=None, changes=None, content_type="application/json") -> Answer:
    headers = {"Client-ID": CID, "X-Project-ID": project}
    for k, v in (changes or {}).items():
        if v is None:
            headers.pop(k, None)
        else:
            headers[k] = project_header(v, project)
    if content_type:
        headers["Content-Type"] = content_type
    data = raw if raw is not None else (json.dumps(body).encode() if has_body else None)
    # Commas stay literal: clients send ?ids=a,b, and falcon splits only those.
    qs = ("?" + urllib.parse.urlencode(list(query), safe=",")) if query else ""
    status, _, doc = exchange(url + path + qs, method, headers, data)
    return Answer(status, doc)


def project_header(value: str, project: str) -> str:
    """Fills request_cases' project placeholders: {project:N} is the case's
    project padded to N characters, {project} the project itself."""
    m = re.fullmatch(r"\{project:(\d+)\}", value)
    if m:
        return project.ljust(int(m.group(1)), "p")
    return value.replace("{project}", project)


def prepare(url: str, project: str, queue: str) -> dict[str, str]:
    """The case's queue: three messages, the oldest claimed. Returns the ids
    by role."""
    path = "/v2/queues/" + queue
    assert send(url, project, "PUT", path).status == 201
    posted = send(url, project, "POST", path + "/messages", has_body=True,
                  body={"messages": [{"body": i, "ttl": 3600} for i in range(3)]})
    assert posted.status == 201, posted
    ids = [r.rsplit("/", 1)[1] for r in posted.doc["resources"]]
    claim = send(url, project, "POST", path + "/claims", query=[("limit", "1")], has_body=True,
                 body={"ttl": 300, "grace": 60})
    assert claim.status == 201, claim
    href = claim.doc["messages"][0]["href"]
    claimed = href.split("/messages/")[1].split("?")[0]
    free = [i for i in ids if i != claimed]
    return {"claimed": claimed, "free": free[0], "free2": free[1],
            "claim": href.split("claim_id=")[1], "unknown": UNKNOWN_ID,
            "malformed": "not-an-id!", "empty": "", "spaced": " " + free[0]}


def resolve(text: str, roles: dict[str, str]) -> str:
    return re.sub(r"\{id:(\w+)\}", lambda m: roles[m.group(1)], text)


def answer(url: str, project: str, roles: dict[str, str], case: Case) -> Answer:
    return send(url, project, case.method, resolve(case.path, roles),
                [(k, resolve(v, roles)) for k, v in case.query], case.body, case.has_body,
                case.raw, case.header_changes, case.content_type)


# Differences docs/compat.md lists, each a rule over (case, sluice, zaqar).
def zaqar_fails(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar answers 5xx where the request is the client's mistake (a
    message that is not an object, metadata of the wrong type, a patch
    that is not a list, ids that are not message ids, include_claimed
    without a marker), or afterwards (stats, once a bulk delete named the
    claim's id): sluice answers it, or says what is wrong."""
    return z.status >= 500 and s.status < 500


def delay_ignored(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar drops a message's own delay unless the queue has a default
    delay, so it never checks it (and reports another fault, or none);
    sluice honours and checks it."""
    msgs = case.body.get("messages") if isinstance(case.body, dict) else None
    return (case.family == "post messages" and s.status == 400
            and (z.status == 201 or "delay" in description(s).lower())
            and isinstance(msgs, list) and any(isinstance(m, dict) and "delay" in m for m in msgs))


def dead_letter_name(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar accepts a dead-letter queue no queue could be named; sluice
    refuses it."""
    dlq = case.body.get("_dead_letter_queue", "q") if isinstance(case.body, dict) else "q"
    return (case.family == "put queue" and s.status == 400 and z.status < 300
            and not (isinstance(dlq, str) and len(dlq) <= QUEUE_NAME_MAX_LEN
                         and QUEUE_NAME_REGEX.match(dlq)))


def grace_on_update(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar ignores grace when a claim is updated, so it never checks it;
    sluice checks it as on creation."""
    return (case.method == "PATCH" and case.family == "claim by id" and s.status == 400
            and isinstance(case.body, dict) and "grace" in case.body)


def malformed_marker(case: Case, s: Answer, z: Answer) -> bool:
    """A marker that is neither a next link's nor a message id: Zaqar lists
    from the start, sluice says it is not a marker."""
    marker = dict(case.query).get("marker", "")
    return (case.family == "list messages" and s.status == 400 and z.status == 200
            and marker not in ("", "{id:claimed}", "{id:free}", "{id:unknown}"))


def metadata_checked(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar skips its type check of a reserved value that is false-like
    ({}, "", false), takes true and false for 1 and 0, and never checks the
    range of _max_claim_count; sluice refuses any of them that is not an
    integer in range, and names it."""
    if not (case.family in ("put queue", "patch queue") and s.status == 400 and (z.status < 300 or z.status == 400)
            and isinstance(s.doc, dict)):
        return False
    key = description(s).split(" ", 1)[0]
    if isinstance(case.body, dict):
        values = {k: v for k, v in case.body.items()}
    elif isinstance(case.body, list):  # a JSON patch: the values it sets
        values = {str(op.get("path", "")).rsplit("/", 1)[-1]: op.get("value") for op in case.body
                  if isinstance(op, dict) and "value" in op}
    else:
        return False
    v = values.get(key)
    return key in values and (isinstance(v, bool) or not isinstance(v, int) or v < 0)


def subscription_checked(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar skips its checks of a subscription's false-like values (a ttl
    of 0 or false, options of [] or "", a subscriber of "" or null) and takes
    "mailto:" with no address; sluice refuses each, on update before it
    looks the subscription up."""
    b = case.body
    if not (case.family in ("subscribe", "subscription calls") and s.status == 400
            and z.status != 400 and isinstance(b, dict)):
        return False
    options, ttl = b.get("options"), b.get("ttl")
    return ((options is not None and not options and not isinstance(options, dict))
            or (ttl is not None and not ttl) or isinstance(ttl, bool)
            or ("subscriber" in b and b["subscriber"] in ("", "mailto:", None)))


def null_on_update(case: Case, s: Answer, z: Answer) -> bool:
    """A PATCH with a null field, or a subscriber that is not a string:
    Zaqar fails it as "Unable to update subscription" whether or not the
    subscription exists; sluice takes null for absent and answers 404 for
    a subscription that does not exist, and refuses the subscriber."""
    return (case.family == "subscription calls" and s.status in (400, 404) and z.status == 400
            and isinstance(z.doc, dict) and z.doc.get("title") == "Unable to update subscription")


def hidden_page(case: Case, s: Answer, z: Answer) -> bool:
    """A page whose messages are all hidden from the client (its own, or
    claimed): Zaqar answers it empty and without a next link, so a client
    stops paging with messages still to come; sluice looks past them."""
    return (case.family == "list messages" and s.status == z.status == 200
            and isinstance(z.doc, dict) and z.doc.get("messages") == [] and z.doc.get("links") == []
            and isinstance(s.doc, dict) and bool(s.doc.get("messages")))


def big_integer(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar refuses a body with an integer outside 64 bits anywhere in it;
    sluice keeps a message body's JSON as sent and reads only the fields it
    uses."""
    return (z.status == 400 and isinstance(z.doc, dict)
            and z.doc.get("description") == "JSON contains integer that is too large.")


def long_project(case: Case, s: Answer, z: Answer) -> bool:
    """A project id over 256 characters: sluice refuses it on every route,
    Zaqar only on routes that name a queue."""
    return (s.status == 400 and case.header_changes.get("X-Project-ID") == "{project:257}")


def first_message_marker(case: Case, s: Answer, z: Answer) -> bool:
    """The marker is the id of the queue's first message (the claimed one
    here): Zaqar takes its position 0 for no marker and lists that message
    again, sluice lists strictly after it."""
    return (case.family == "list messages" and dict(case.query).get("marker") == "{id:claimed}"
            and s.status == z.status == 200)


def empty_id(case: Case, s: Answer, z: Answer) -> bool:
    """A path ending in an empty id (…/claims/): no route in sluice, the
    item with id "" in Zaqar."""
    return case.path.endswith("{id:empty}") and s.status == 404


def not_served(case: Case, s: Answer, z: Answer) -> bool:
    """A method the route does not serve (HEAD on most), with a bad header:
    sluice says 405 first, Zaqar checks the headers first."""
    return s.status == 405 and 400 <= z.status < 500 and z.status != 404


def share_methods(case: Case, s: Answer, z: Answer) -> bool:
    """POST …/share naming a method no request to a shared resource can
    carry (PATCH, or a lower-case "get": HTTP methods are case-sensitive):
    Zaqar signs it, sluice refuses it."""
    methods = case.body.get("methods") if isinstance(case.body, dict) else None
    return (case.family == "share" and s.status == 400 and z.status in (200, 400) and isinstance(methods, list)
            and any(m not in ("GET", "HEAD", "POST", "PUT", "DELETE") for m in methods))


def signed_path_pattern(case: Case, s: Answer, z: Answer) -> bool:
    """A signed request to a path the URL does not cover, which one of its
    paths matches as a regular expression: Zaqar tests each signed path
    with re.search, so a URL signed for queue "a.b" also opens "a-b" and
    "axb" (the dot matches any character), and a path list of ".*" passes
    its path check; sluice serves only the signed paths and what lies below
    them, and answers 404."""
    paths = (case.header_changes.get("URL-Paths") or "").split(",")

    def pattern(p: str) -> bool:
        try:
            return re.search(p, case.path) is not None
        except re.error:
            return False
    return (case.family == "signed" and s.status == 404 and z.status != 404
            and not any(p and (case.path == p or case.path.startswith(p + "/")) for p in paths)
            and any(pattern(p) for p in paths))


def boolean_integer(case: Case, s: Answer, z: Answer) -> bool:
    """A boolean where an integer belongs (a message's ttl, a claim's
    grace, a subscription's ttl): Python's bool is an int, so Zaqar takes true and false for 1
    and 0 and reports their range, or another fault; sluice says the value
    is no integer (docs/api.md)."""
    m = (re.fullmatch(r'The value of the "(\w+)" field must be a int\.', description(s))
         or re.fullmatch(r"(TTL) must be an integer\.", description(s)))
    if not m:
        return False
    field = m.group(1).lower()
    body = case.body if isinstance(case.body, dict) else {}
    msgs = body.get("messages")
    docs = [body, *(d for d in msgs if isinstance(d, dict))] if isinstance(msgs, list) else [body]
    return any(isinstance(d.get(field), bool) for d in docs)


def zaqar_typo(case: Case, s: Answer, z: Answer) -> bool:
    """Zaqar's description has a doubled space ("262144,  and") or a
    misplaced quote ("resource: '/x, e.g /metadata/key'"); sluice's has
    neither."""
    zd, sd = description(z), description(s)
    m = re.fullmatch(r"Invalid JSON pointer for this resource: '(.*), e\.g /metadata/key'", zd)
    return (re.sub(r"(\S)  +", r"\1 ", zd) == sd
            or bool(m and sd == f'Invalid JSON pointer for this resource: "{m.group(1)}", e.g /metadata/key'))


def flavor_placed(case: Case, s: Answer, z: Answer) -> bool:
    """Pooled: a queue's `_flavor` chooses its pools, so one that does not
    exist is refused; Zaqar without pooling keeps it as plain metadata."""
    return (isinstance(case.body, dict) and "_flavor" in case.body and s.status == 400
            and re.fullmatch(r"Flavor \S+ does not exist", description(s)) is not None and z.status < 300)


KNOWN = [zaqar_fails, delay_ignored, dead_letter_name, grace_on_update, malformed_marker,
         metadata_checked, subscription_checked, null_on_update, hidden_page, big_integer,
         long_project, first_message_marker, share_methods, empty_id, not_served, signed_path_pattern,
         zaqar_typo, boolean_integer, flavor_placed]


# What purge removes when the body does not say (Zaqar's default).
PURGE_DEFAULT = ["messages", "subscriptions"]


def leaves_claimed(case: Case, a: Answer, held: set[str]) -> bool:
    """A step after which the queues differ as docs/api.md says (Storage
    semantics 7 and 8): a purge of messages, or a bulk delete naming a
    message a claim may hold (held: the roles of such messages), without
    its claim. Zaqar keeps claimed messages in the first and removes them
    in the second; sluice does the opposite. Later steps of the case would
    compare that, not the servers."""
    if a.status >= 300:
        return False
    if case.family == "purge":
        types = PURGE_DEFAULT
        if case.raw is None and isinstance(case.body, dict):
            types = case.body.get("resource_types", PURGE_DEFAULT)
        return isinstance(types, list) and "messages" in types
    return case.family == "delete messages" and any(
        k == "ids" and "{id:%s}" % role in v for k, v in case.query for role in held)


STATS = Case("stats", "GET", "/v2/queues/{queue}/stats")


def counts(a: Answer) -> object:
    """The message counts of a stats answer (free, claimed, total)."""
    msgs = a.doc.get("messages") if isinstance(a.doc, dict) else None
    if a.status != 200 or not isinstance(msgs, dict):
        return a.status
    return {k: msgs.get(k) for k in ("free", "claimed", "total")}


def delayed_post(steps: list[Case]) -> bool:
    """A post of a message with its own delay: Zaqar drops the delay on a
    queue without a default one (delay_ignored), so the counts may differ."""
    return any(c.family == "post messages" and isinstance(c.body, dict)
               and isinstance(c.body.get("messages"), list)
               and any(isinstance(m, dict) and m.get("delay") for m in c.body["messages"])
               for c in steps)


def shape_of(case: Case, a: Answer) -> object:
    """parity.shape, without what docs/compat.md lists as harmless: the
    claim_id of a popped message, the marker in a next link, the type of
    with_count's count (Zaqar's is a boolean), and include_delayed in a
    next link when the client said false (Zaqar overrides it with true on
    a queue without a default delay, as it ignores a message's own delay
    there)."""
    import parity

    doc = a.doc
    if isinstance(doc, dict):
        doc = dict(doc)
        if isinstance(doc.get("messages"), list) and case.method == "DELETE":
            doc["messages"] = [{k: v for k, v in m.items() if k != "claim_id"}
                               for m in doc["messages"] if isinstance(m, dict)]
        if isinstance(doc.get("links"), list):
            said_false = dict(case.query).get("include_delayed") in FALSE_STRINGS

            def href(h: str) -> str:
                h = re.sub(r"marker=[^&]*", "marker=<m>", h)
                return re.sub(r"include_delayed=[a-z]+", "include_delayed=<b>", h) if said_false else h
            doc["links"] = [{**ln, "href": href(ln.get("href", ""))} for ln in doc["links"]
                            if isinstance(ln, dict)]
        doc.pop("count", None)
    return parity.shape(doc)


def description(a: Answer) -> str:
    return str(a.doc.get("description", "")) if isinstance(a.doc, dict) else ""


# A Python set as Zaqar prints one: strings, integers, None.
PY_SET = re.compile(r"\{((?:'[^']*'|-?\d+|None)(?:, (?:'[^']*'|-?\d+|None))*)\}")


def words(a: Answer, roles: dict[str, str]) -> tuple[object, str]:
    """An error's title and description, with the server's own ids put back
    as their roles and Python's sets in one order (Python prints a set of
    strings in an order that changes with each process' hash seed)."""
    text = description(a)
    for role, value in roles.items():
        if len(value.strip()) > 3:
            text = text.replace(value.strip(), "{id:%s}" % role)
    text = PY_SET.sub(lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)
    return (a.doc.get("title") if isinstance(a.doc, dict) else None), text


# "pooled": sluice with a catalog and one Redis pool that every queue is
# placed on, so the pooled driver (placement, routing) answers.
POOLED = ["pooled"] if "redis" in SLUICE_TARGETS else []


@pytest.fixture(scope="module", params=SLUICE_TARGETS + POOLED)
def servers(request, redis_server, tmp_path_factory):
    from zaqar_server import ZaqarServer

    need((BIN / "sluice-server").is_file(), f"{BIN / 'sluice-server'} is missing (make build-server)")
    if request.param == "mongo":
        store = request.getfixturevalue("ferretdb").url("generated")
    else:
        store = {"memory": "memory", "redis": redis_server.url(5), "pooled": redis_server.url(7)}[request.param]
    extra = ["--signed-url-secret", SECRET]
    if request.param == "pooled":
        extra += ["--catalog", redis_server.url(13)]
    with SluiceServer(tmp_path_factory.mktemp("sluice-gen"), store, extra_args=extra) as sluice, \
            ZaqarServer(tmp_path_factory.mktemp("zaqar-gen"), redis_server.url(6),
                        extra_conf=f"\n[signed_url]\nsecret_key = {SECRET}\n") as zaqar:
        if request.param == "pooled":
            status, _, doc = exchange(sluice.url + "/v2/pools/gen", "PUT", {
                "Client-ID": CID, "X-Project-ID": "admin", "X-Roles": "admin", "Content-Type": "application/json"},
                json.dumps({"weight": 100, "uri": redis_server.url(14)}).encode())
            assert status == 201, (status, doc)
        yield sluice, zaqar, request.param


def test_generated_requests_match_zaqar(servers):
    sluice, zaqar, target = servers
    rng = random.Random(SEED)
    found = Differences()
    for i in range(CASES):
        # Each store's run starts a Zaqar on the same database: projects
        # of their own keep the runs apart.
        project, queue = f"gen-{target}-{SEED}-{i}", f"q{i}"
        steps = draw_steps(rng, "/v2/queues/" + queue)
        roles_s, roles_z = prepare(sluice.url, project, queue), prepare(zaqar.url, project, queue)
        held = {"claimed"}  # roles of messages a claim may hold
        for n, case in enumerate(steps):
            s = answer(sluice.url, project, roles_s, case)
            z = answer(zaqar.url, project, roles_z, case)
            if case.family == "create claim" and s.status == 201:
                held |= {"free", "free2"}
            after = "".join(f"  after {b.describe()}\n" for b in steps[:n])
            if s.status >= 500:
                found.add(f"{i}.{n}", "sluice answered 5xx", case, s, z, after)
                break
            if s.status != z.status:
                why = "status"
            elif s.status < 300 and shape_of(case, s) != shape_of(case, z):
                why = "body shape"
            elif s.status >= 400 and words(s, roles_s) != words(z, roles_z):
                why = "error words"
            elif leaves_claimed(case, s, held):
                found.count("leaves_claimed")
                break
            else:
                continue
            found.judge(f"{i}.{n}", why, case, s, z, KNOWN, after)
            # The queues now differ as the difference made them: later
            # steps would compare that, not the servers.
            break
        else:
            # Every step agreed: so must what the queues now hold.
            s, z = (send(url, project, "GET", f"/v2/queues/{queue}/stats") for url in (sluice.url, zaqar.url))
            if counts(s) != counts(z) and not delayed_post(steps):
                found.judge(f"{i}.end", "message counts", STATS, s, z, KNOWN,
                            "".join(f"  after {b.describe()}\n" for b in steps))
    found.check(SEED, CASES)


def signed_answer(url: str, project: str, case: SignedCase) -> tuple[Case, Answer]:
    """Sets up the case's two queues, signs a URL for the first, and sends
    the case's request with the URL's headers, tampered as the case says.
    Returns the request as sent (ids and headers resolved) and the answer."""
    roles = prepare(url, project, case.queue)
    roles.update({"n_" + k: v for k, v in prepare(url, project, case.neighbour).items()})
    shared = send(url, project, "POST", f"/v2/queues/{case.queue}/share", body=case.share, has_body=True)
    assert shared.status == 200, (case.describe(), shared)
    req = case.request
    path = resolve(req.path.replace("{q}", case.queue).replace("{n}", case.neighbour), roles)
    sent = Case(req.family, req.method, path, [(k, resolve(v, roles)) for k, v in req.query], req.body,
                req.has_body, None, tampered(shared.doc, case, "/v2/queues/"), req.content_type)
    return sent, send(url, project, sent.method, sent.path, sent.query, sent.body, sent.has_body,
                      None, sent.header_changes, sent.content_type)


def test_generated_signed_requests_match_zaqar(servers):
    """Pre-signed URLs, used as signed and tampered with, on the signed
    queue's routes and a neighbour's: both servers must serve and refuse
    alike, and leave both queues holding the same messages."""
    sluice, zaqar, target = servers
    rng = random.Random(SEED)
    found = Differences()
    for i in range(SIGNED_CASES):
        project = f"signed-{target}-{SEED}-{i}"
        case = draw_signed(rng)
        sent, s = signed_answer(sluice.url, project, case)
        _, z = signed_answer(zaqar.url, project, case)
        why = None
        if s.status >= 500:
            why = "sluice answered 5xx"
        elif s.status != z.status:
            why = "status"
        elif s.status < 300 and shape_of(sent, s) != shape_of(sent, z):
            why = "body shape"
        else:
            for queue in (case.queue, case.neighbour):
                got = [send(url, project, "GET", f"/v2/queues/{queue}/stats") for url in (sluice.url, zaqar.url)]
                if counts(got[0]) != counts(got[1]):
                    why, s, z = f"message counts of {queue}", got[0], got[1]
                    break
        if why is None:
            continue
        sent_line = f"  sent {sent.describe()}\n"
        if why == "sluice answered 5xx":
            found.add(str(i), why, case, s, z, sent_line)
        else:
            found.judge(str(i), why, case, s, z, KNOWN, sent_line, subject=sent)
    found.check(SEED, SIGNED_CASES, "signed cases")
    print(f"signed cases: {SIGNED_CASES}, documented differences: {found.explained}")
