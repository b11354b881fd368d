"""The pools and flavors admin API against the real Zaqar 23.0.1 in pooling
and admin mode, on generated requests.

Each case registers a pool on both servers, then sends one to four admin
calls drawn over a few names of its own (pools, flavors, one that does not
exist): pool and flavor bodies with every field present or not, of the
right or wrong JSON type, at and beyond its range, unreachable or
malformed URIs, flavors listing pools that exist, do not, or twice; reads,
listings with paging parameters, deletes. Both servers must agree in
status and, for a success that shows a pool or a flavor, in its values
(name, uri, weight, flavor, options; pool_list and capabilities), unless
the difference is one docs/compat.md lists under "Pools and flavors",
recognised here by a rule each. Error words are not compared: Zaqar's
are jsonschema dumps. PARITY_SEED and ADMIN_CASES explore other draws.

Then an operator's session through the unchanged python-zaqarclient's own
pool and flavor calls must show the same on both servers.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from conftest import make_client
from harness import BIN, SluiceServer, need
from parity import CID, Answer, Differences, exchange

SEED = int(os.environ.get("PARITY_SEED", "7"))
CASES = int(os.environ.get("ADMIN_CASES", "250"))
UNREACHABLE = "redis://127.0.0.1:1/0"


class Call:
    def __init__(self, method: str, path: str, body: object = None, raw: bytes | None = None):
        self.method, self.path, self.body, self.raw = method, path, body, raw

    def describe(self) -> str:
        sent = self.raw if self.raw is not None else ("" if self.body is None else json.dumps(self.body))
        return f"{self.method} {self.path} {sent}"


def send(url: str, call: Call) -> Answer:
    headers = {"Client-ID": CID, "X-Project-ID": "admin-parity", "X-Roles": "admin",
               "Content-Type": "application/json"}
    data = call.raw if call.raw is not None else (None if call.body is None else json.dumps(call.body).encode())
    status, _, doc = exchange(url + call.path, call.method, headers, data)
    return Answer(status, doc)


def maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def pool_body(rng: random.Random, uri: str, other: str, names: dict[str, list[str]], patch: bool) -> dict:
    """uri is the pool's own database, other another pool's."""
    body: dict = {}
    if maybe(rng, 0.5 if patch else 0.9):
        body["weight"] = rng.choice([0, 1, 100, 4294967295, -1, 4294967296, 1.5, "1", True, None])
    if maybe(rng, 0.4 if patch else 0.9):
        body["uri"] = rng.choice([uri, uri, uri, uri, other, UNREACHABLE, "x", 7, ""])
    if maybe(rng, 0.3):
        body["flavor"] = rng.choice(names["flavors"] + ["nope", 5, None])
    if maybe(rng, 0.2):
        body["options"] = rng.choice([{}, {"a": 1}, [], "x"])
    if maybe(rng, 0.05):
        body["extra"] = 1
    return body


def flavor_body(rng: random.Random, names: dict[str, list[str]]) -> dict:
    body: dict = {}
    if maybe(rng, 0.9):
        pools = names["pools"] + ["nope"]
        body["pool_list"] = rng.choice([
            [rng.choice(pools)], rng.sample(pools, 2), [names["pools"][0]], [names["pools"][0]], [], [1], "p1"])
    if maybe(rng, 0.2):
        body["capabilities"] = rng.choice([{}, {"x": 1}, []])
    if maybe(rng, 0.05):
        body["extra"] = 1
    return body


def draw_call(rng: random.Random, uris: dict[str, str], names: dict[str, list[str]]) -> Call:
    name = rng.choice(list(uris))
    pool = "/v2/pools/" + name
    uri, other = uris[name], rng.choice([u for n, u in uris.items() if n != name])
    flavor = "/v2/flavors/" + rng.choice(names["flavors"] + ["nope"])
    k = rng.randrange(12)
    if k < 3:
        if maybe(rng, 0.04):
            return Call("PUT", pool, raw=rng.choice([b"[1]", b"{", b"null", b""]))
        return Call("PUT", pool, pool_body(rng, uri, other, names, patch=False))
    if k < 5:
        return Call("PATCH", pool, pool_body(rng, uri, other, names, patch=True))
    if k < 7:
        return Call("PUT", flavor, flavor_body(rng, names))
    if k == 7:
        return Call("PATCH", flavor, flavor_body(rng, names))
    if k == 8:
        return Call("GET", rng.choice([pool, pool + "?detailed=true", flavor, flavor + "?detailed=true"]))
    if k == 9:
        return Call("DELETE", rng.choice([pool, flavor]))
    what = rng.choice(["pools", "flavors"])
    query = rng.choice(["", "?limit=1", "?limit=0", "?limit=21", "?limit=x", "?detailed=true",
                        "?detailed=maybe", "?marker=zzzz"])
    return Call("GET", f"/v2/{what}{query}")


# Differences docs/compat.md lists under "Pools and flavors", each a rule
# over (call, sluice, zaqar).
def zaqar_fails(call: Call, s: Answer, z: Answer) -> bool:
    """Zaqar answers 500: a pool PUT naming a flavor (sluice serves it), on
    another pool's URI (sluice: 409) or without a body (400)."""
    return z.status >= 500 and (s.status >= 400 or "flavor" in body_of(call))


def body_of(call: Call) -> dict:
    return call.body if isinstance(call.body, dict) else {}


def flavor_checked(call: Call, s: Answer, z: Answer) -> bool:
    """A pool naming a flavor that does not exist: Zaqar takes it."""
    return (call.path.startswith("/v2/pools/") and "flavor" in body_of(call)
            and z.status < 300 and s.status == 400 and "does not exist" in str(s.doc))


def empty_pool_list(call: Call, s: Answer, z: Answer) -> bool:
    """A flavor with no pool: sluice takes it (pools may join later), Zaqar
    refuses it."""
    return body_of(call).get("pool_list") == [] and z.status == 400 and (s.status < 300 or s.status == 404)


def null_is_absent(call: Call, s: Answer, z: Answer) -> bool:
    """A pool body's null field: sluice reads it as absent, Zaqar refuses
    its type."""
    return any(v is None for v in body_of(call).values()) and z.status == 400


def capabilities_checked(call: Call, s: Answer, z: Answer) -> bool:
    """A flavor PATCH whose capabilities are no object: Zaqar checks only
    pool_list on a PATCH."""
    caps = body_of(call).get("capabilities", {})
    return not isinstance(caps, dict) and s.status == 400 and z.status < 300


def unknown_field(call: Call, s: Answer, z: Answer) -> bool:
    """A PATCH with a field neither body has: Zaqar checks only the fields
    it knows on a PATCH, sluice refuses the unknown one."""
    return (call.method == "PATCH" and s.status == 400 and z.status < 300
            and str(s.doc).find("Unknown field") >= 0)


def missing_first(call: Call, s: Answer, z: Answer) -> bool:
    """A PATCH of a pool or flavor that does not exist, with a body one of
    them refuses: both refuse, in another order. Zaqar checks a pool's body
    (and connects to its URI) before it looks the pool up, and looks a
    flavor up before it checks its pools; sluice checks the body's shape,
    then looks either up, then checks what the body names."""
    return call.method == "PATCH" and 400 <= s.status < 500 and 400 <= z.status < 500 and 404 in (s.status, z.status)


def duplicate_pools(call: Call, s: Answer, z: Answer) -> bool:
    """A flavor listing one pool twice: Zaqar keeps it once."""
    pools = body_of(call).get("pool_list")
    return (isinstance(pools, list) and len(pools) != len(set(map(str, pools)))
            and z.status < 300 and s.status == 400 and "listed twice" in str(s.doc))


def listing_page(call: Call, s: Answer, z: Answer) -> bool:
    """A listing holds every case's pools and flavors on both servers, in
    an order of their own: compared by status only."""
    return call.method == "GET" and call.path.startswith(("/v2/pools?", "/v2/flavors?")) and s.status == z.status


KNOWN = [zaqar_fails, flavor_checked, empty_pool_list, null_is_absent, capabilities_checked, unknown_field,
         missing_first, duplicate_pools, listing_page]


def shown(call: Call, a: Answer) -> object:
    """The values a success shows of a pool or a flavor."""
    if not isinstance(a.doc, dict):
        return a.doc
    if "pools" in a.doc or "flavors" in a.doc:
        return sorted(x.get("name") for x in a.doc.get("pools", a.doc.get("flavors")) or [])
    keep = {"name", "uri", "weight", "flavor", "options", "capabilities"}
    out = {k: v for k, v in a.doc.items() if k in keep}
    if "pool_list" in a.doc:
        out["pool_list"] = sorted(a.doc["pool_list"])
    return out


@pytest.fixture(scope="module")
def servers(redis_server, tmp_path_factory):
    from zaqar_server import ZaqarServer

    need((BIN / "sluice-server").is_file(), f"{BIN / 'sluice-server'} is missing (make build-server)")
    with SluiceServer(tmp_path_factory.mktemp("sluice-admin"), "memory",
                      extra_args=["--catalog", redis_server.url(8)]) as sluice, \
            ZaqarServer(tmp_path_factory.mktemp("zaqar-admin"), redis_server.url(9),
                        admin_mode=True, pooling=True) as zaqar:
        # Each pool name has a database of its own: both servers refuse a
        # second pool on a URI in use.
        yield sluice, zaqar, {k: redis_server.url(10 + i) for i, k in enumerate(["p0", "p1", "nope"])}


def test_generated_admin_requests_match_zaqar(servers):
    sluice, zaqar, dbs = servers
    rng = random.Random(SEED)
    found = Differences()
    for i in range(CASES):
        # Names of the case's own: each server keeps every case's pools.
        names = {"pools": [f"c{SEED}x{i}p{k}" for k in range(2)], "flavors": [f"c{SEED}x{i}f{k}" for k in range(2)]}
        uris = {f"c{SEED}x{i}{k}": u for k, u in dbs.items()}
        setup = Call("PUT", "/v2/pools/" + names["pools"][0], {"weight": 10, "uri": uris[names["pools"][0]]})
        assert send(sluice.url, setup).status == send(zaqar.url, setup).status == 201
        steps = [draw_call(rng, uris, names) for _ in range(rng.choice([1, 2, 3, 4]))]
        for n, call in enumerate(steps):
            s, z = send(sluice.url, call), send(zaqar.url, call)
            after = "".join(f"  after {b.describe()}\n" for b in steps[:n])
            if s.status >= 500:
                found.add(f"{i}.{n}", "sluice answered 5xx", call, s, z, after)
                break
            if s.status != z.status:
                why = "status"
            elif s.status < 300 and shown(call, s) != shown(call, z):
                why = "values"
            else:
                continue
            found.judge(f"{i}.{n}", why, call, s, z, KNOWN, after)
            # The servers' catalogs now differ as the difference made them.
            break
        # The databases are the next case's: its pools go.
        for url in (sluice.url, zaqar.url):
            for path in [f"/v2/flavors/{f}" for f in names["flavors"] + ["nope"]] + [f"/v2/pools/{p}" for p in uris]:
                send(url, Call("DELETE", path))
    found.check(SEED, CASES)


def admin_client(url: str):
    """The unchanged python-zaqarclient with the admin role, as a deployment's auth
    middleware would add it (the client's noauth sends only a project)."""
    c = make_client(url, "admin-client")
    plain = c._request_and_transport

    def with_role():
        req, trans = plain()
        req.headers["X-Roles"] = "admin"
        return req, trans

    c._request_and_transport = with_role
    return c


def client_admin_workflow(url: str, uris: dict[str, str]) -> list[tuple[str, object]]:
    """An operator's pools-and-flavors session through the client's own calls:
    what each step shows, with each server's database URIs named by pool."""
    c = admin_client(url)
    named = {u: k for k, u in uris.items()}
    seen: list[tuple[str, object]] = []

    def pool_view(doc: dict) -> dict:
        return {k: named.get(v, v) if k == "uri" else v for k, v in doc.items()}

    def pools() -> list[dict]:
        return [pool_view({k: v for k, v in vars(p).items() if k != "client"})
                for p in c.pools(detailed=True)]

    p0 = c.pool("cp0", weight=10, uri=uris["cp0"], options={"a": 1})
    p1 = c.pool("cp1", weight=20, uri=uris["cp1"])
    seen += [("pool get", pool_view(p0.get())), ("pools", pools()),
             ("pools, one per page", [p.name for p in c.pools(limit=1)])]
    f = c.flavor("cf0", pool_list=["cp0"])
    seen.append(("flavor get", f.get()))
    f.update({"pool_list": ["cp0", "cp1"]})
    seen += [("flavor updated", f.get()), ("pool after flavor", pool_view(p0.get())),
             ("flavors", [{k: v for k, v in vars(x).items() if k != "client"} for x in c.flavors(detailed=True)])]
    q = c.queue("cq", force_create=True)
    q.metadata(new_meta={"_flavor": "cf0"})
    q.post([{"body": {"n": 1}, "ttl": 60}])
    seen += [("flavored queue's messages", [m.body for m in q.messages(echo=True)]),
             ("queues", [(x.name, x._metadata) for x in c.queues(detailed=True)[0]])]
    p0.update({"weight": 5})
    seen.append(("pool updated", pool_view(p0.get())))
    q.delete()
    f.delete()
    p1.delete()
    p0.delete()
    seen += [("pools at the end", pools()), ("flavors at the end", [x.name for x in c.flavors()])]
    return seen


def test_zaqarclient_admin_workflow_matches_zaqar(servers, redis_server):
    """The unchanged client's pool and flavor calls (create, get, list, update,
    delete, a queue placed by its flavor) see the same on both servers."""
    sluice, zaqar, _ = servers
    got = {name: client_admin_workflow(url, {"cp0": redis_server.url(20 + base), "cp1": redis_server.url(21 + base)})
           for name, url, base in (("sluice", sluice.url, 0), ("zaqar", zaqar.url, 2))}
    for (step, s), (_, z) in zip(got["sluice"], got["zaqar"], strict=True):
        assert s == z, f"{step}: sluice {s!r}, zaqar {z!r}"
