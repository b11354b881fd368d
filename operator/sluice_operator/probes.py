"""Shard readiness, decided by talking to the shard itself (PING / hello),
never by trusting a third-party operator's status fields."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import redis
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError
from redis.sentinel import Sentinel


def _hosts(netloc: str, default_port: int) -> list[tuple[str, int]]:
    out = []
    for part in netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = part.partition(":")
        out.append((host, int(port) if port else default_port))
    return out


def _redis_tls(uri: str, ca_file: str | None) -> tuple[str, dict[str, Any]]:
    # sluice-server's tls_ca_file names a file in the server's pod: the operator
    # drops it and trusts its own copy of the CA (ca_file) instead.
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "tls_ca_file"]
    kw: dict[str, Any] = {}
    if parts.scheme == "rediss" and ca_file:
        kw["ssl_ca_certs"] = ca_file
    return parts._replace(query=urlencode(query)).geturl(), kw


def probe_redis(uri: str, timeout: float, ca_file: str | None = None) -> tuple[bool, str]:
    """probe_redis PINGs a Redis URI and wants a primary, as probe_mongo wants a writable
    one; the Sentinel form (?master=) asks the sentinels for the primary first. rediss://
    verifies the server with ca_file (else the system roots)."""
    parts = urlsplit(uri)
    master = parse_qs(parts.query).get("master", [None])[0]
    try:
        if master:
            sentinel = Sentinel(_hosts(parts.netloc, 26379), socket_timeout=timeout)
            host, port = sentinel.discover_master(master)
            conn = redis.Redis(host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout)
        else:
            plain, kw = _redis_tls(uri, ca_file)
            conn = redis.Redis.from_url(plain, socket_timeout=timeout, socket_connect_timeout=timeout, **kw)
        try:
            conn.ping()
            return _redis_role(conn)
        finally:
            conn.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        return False, f"PING failed: {exc}"


def _redis_role(conn: redis.Redis) -> tuple[bool, str]:
    # A replica answers PING but refuses every write (READONLY), so a shard whose
    # node is one is not ready: right after bring-up, Sentinel can name a node the
    # replication set-up has not yet made primary, or one just demoted.
    try:
        role = conn.execute_command("ROLE")
    except redis.exceptions.ResponseError as exc:
        # An ACL user without ROLE, or a managed Redis that renamed it away, can still
        # be a working shard: PING is all we can know.
        return True, f"PING answered (ROLE refused: {exc}; primary unchecked)"
    kind = role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    if kind == "master":
        return True, "PING answered by a primary"
    if kind == "slave":
        primary = [x.decode() if isinstance(x, bytes) else str(x) for x in role[1:3]]
        return False, f"a replica of {primary[0]}:{primary[1]}, not a primary: writes would be refused"
    return False, f"ROLE is {kind!r}, not a primary: writes would be refused"


def _mongo_tls(uri: str, ca_file: str | None) -> tuple[str, dict[str, Any]]:
    # As _redis_tls: the URI's tlsCAFile is the server's path; the operator's copy replaces it.
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "tlscafile"]
    kw: dict[str, Any] = {"tlsCAFile": ca_file} if ca_file else {}
    return parts._replace(query=urlencode(query)).geturl(), kw


def probe_mongo(uri: str, timeout: float, ca_file: str | None = None) -> tuple[bool, str]:
    """probe_mongo runs hello and wants a writable primary; with tls=true it verifies the
    server with ca_file (else the system roots)."""
    ms = int(timeout * 1000)
    mc: MongoClient[dict[str, Any]]
    uri, kw = _mongo_tls(uri, ca_file)
    try:
        with MongoClient(uri, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, socketTimeoutMS=ms, **kw) as mc:
            hello = mc.admin.command("hello")
    except PyMongoError as exc:
        return False, f"hello failed: {exc}"
    if not hello.get("isWritablePrimary", hello.get("ismaster", False)):
        return False, "hello: no writable primary yet"
    return True, "hello: writable primary"


def probe(uri: str, timeout: float, ca_file: str | None = None) -> tuple[bool, str]:
    """probe checks one shard URI by its scheme; ca_file is the operator's copy of the CA
    a TLS backend's certificate is verified with (the URI's own CA option names a file
    in the server's pod)."""
    if uri.startswith(("redis://", "rediss://")):
        return probe_redis(uri, timeout, ca_file)
    if uri.startswith(("mongodb://", "mongodb+srv://")):
        return probe_mongo(uri, timeout, ca_file)
    return False, f"unsupported URI scheme in {redact(uri)}"


def initiate_replica_set(
    hosts: list[str], name: str, timeout: float, tls: bool = False, ca_file: str | None = None
) -> str:
    """initiate_replica_set starts a builtin MongoDB replica set once; returns what it did.
    tls: the members require TLS, verified with ca_file (else the system roots)."""
    ms = int(timeout * 1000)
    mc: MongoClient[dict[str, Any]]
    kw: dict[str, Any] = {"tls": True, **({"tlsCAFile": ca_file} if ca_file else {})} if tls else {}
    try:
        with MongoClient(f"mongodb://{hosts[0]}/?directConnection=true", serverSelectionTimeoutMS=ms, **kw) as mc:
            try:
                mc.admin.command("replSetGetStatus")
                return "replica set already initiated"
            except OperationFailure as exc:
                if exc.code != 94:  # NotYetInitialized
                    return f"replSetGetStatus: {exc}"
            members = [{"_id": i, "host": h} for i, h in enumerate(hosts)]
            mc.admin.command("replSetInitiate", {"_id": name, "members": members})
            return "replica set initiated"
    except PyMongoError as exc:
        return f"replica set not initiated yet: {exc}"


def redact(uri: str) -> str:
    """redact drops credentials from a URI so it can go into status and events."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def endpoint(uri: str) -> str:
    """endpoint is host:port (first host) of a URI, without credentials."""
    return urlsplit(redact(uri)).netloc
