"""make bench-redis-layout: what one stored message costs Redis in each
message layout, measured on one redis-server with the shard settings, so
the choice of layout rests on numbers rather than on estimates.

Each layout is a Lua script that stores a batch of messages the way that
layout would (a 1 KiB body, created, expires, client id), called through
EVALSHA for N messages in batches of B per call (B=1: a post alone at light
load; B=8: about what group commit gathers at 32 connections):

  key-per-message   a hash per message with its own TTL, and three index
                    entries per message (:ids, :exp, :rdy sorted sets)
  stream            one stream entry per message (XADD), the entry id its
                    posting order: no per-message key, TTL or index (the
                    layout storage/redis/post.lua stores)
  stream+id-index   a stream entry plus one sorted-set entry mapping an
                    opaque message id to it (what ids not derived from the
                    entry id would need)

After the post phase of the last batch size, the two main layouts also
claim one message and delete it with its claim id, --cycles times (one
call each, the shape of a consumer at light load).

Per layout and batch size: bytes of `INFO memory` used_memory grown per
message, script microseconds per message and per call (`INFO
commandstats`, after CONFIG RESETSTAT), and the time inside each Redis
command per message. Traffic goes to 127.0.0.1 only; each run is bounded
by N.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))
from harness import RedisServer  # noqa: E402

TTL_MS = 3_600_000

# KEYS[1]: the queue's key prefix. ARGV: now, then per message its id and
# body. Every layout writes the same fields of a message.
LAYOUTS = {
    "key-per-message": """
local now = tonumber(ARGV[1])
local e = tostring(now + %(ttl)d)
local seq = redis.call('HINCRBY', KEYS[1] .. ':q', 's', (#ARGV - 1) / 2) - (#ARGV - 1) / 2
local ids, exps, rdy = {}, {}, {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  seq = seq + 1
  local ss = tostring(seq)
  local mk = KEYS[1] .. ':m:' .. id
  redis.call('HSET', mk, 'b', ARGV[i + 1], 'c', ARGV[1], 'e', e, 's', ss, 'u', 'client-0001')
  redis.call('PEXPIRE', mk, %(ttl)d)
  ids[#ids + 1], ids[#ids + 2] = ss, id
  exps[#exps + 1], exps[#exps + 2] = e, id
  rdy[#rdy + 1], rdy[#rdy + 2] = ss, id
end
redis.call('ZADD', KEYS[1] .. ':ids', unpack(ids))
redis.call('ZADD', KEYS[1] .. ':exp', unpack(exps))
redis.call('ZADD', KEYS[1] .. ':rdy', unpack(rdy))
return 0
""",
    "stream": """
local e = tostring(tonumber(ARGV[1]) + %(ttl)d)
for i = 2, #ARGV, 2 do
  redis.call('XADD', KEYS[1] .. ':st', '*', 'b', ARGV[i + 1], 'c', ARGV[1], 'e', e, 'u', 'client-0001')
end
return 0
""",
    "stream+id-index": """
local e = tostring(tonumber(ARGV[1]) + %(ttl)d)
local ids = {}
for i = 2, #ARGV, 2 do
  local sid = redis.call('XADD', KEYS[1] .. ':st', '*', 'b', ARGV[i + 1], 'c', ARGV[1], 'e', e, 'u', 'client-0001')
  ids[#ids + 1], ids[#ids + 2] = 0, ARGV[i] .. '|' .. sid
end
redis.call('ZADD', KEYS[1] .. ':ids', unpack(ids))
return 0
""",
}

# What a claim records in both layouts: its hash (with a TTL) and the
# sorted-set entries that find lapsed claims and held messages.
CLAIM_BOOKKEEPING = """
local ck = P .. ':c:' .. cid
redis.call('HSET', ck, 't', ttl, 'g', 0, 'c', ARGV[1], 'e', cexp, 'i', table.concat(out, ' '))
redis.call('PEXPIRE', ck, ttl)
redis.call('ZADD', P .. ':held', unpack(held))
redis.call('ZADD', P .. ':cl', cexp, cid)
return out
"""

# Claiming one message and deleting it with its claim id, as a consumer
# does, in the two layouts: KEYS[1] the queue's prefix; claim ARGV: now,
# claim id, claim ttl ms; delete ARGV: now, message id, claim id. Both keep
# what the functions keep (claim state, the indexes that find lapsed
# claims), without the dead-letter, delay and move checks, which cost the
# same in either layout. In the stream layout a cursor in the queue hash
# marks what was ever handed out and only a claimed message has claim state
# (released messages would need a list of their own, not measured here).
CYCLES = {
    "key-per-message": ("""
local P, now, cid, ttl = KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ids = redis.call('ZRANGE', P .. ':rdy', 0, 0)
if #ids == 0 then return {} end
redis.call('ZREM', P .. ':rdy', unpack(ids))
local cexp = tostring(now + ttl)
local out, held = {}, {}
for _, id in ipairs(ids) do
  local mk = P .. ':m:' .. id
  local h = redis.call('HMGET', mk, 'b', 'c', 'e', 'd', 'u', 'n')
  redis.call('HSET', mk, 'k', cid, 'x', cexp, 'n', '1')
  held[#held + 1], held[#held + 2] = cexp, id
  out[#out + 1] = id
end
""" + CLAIM_BOOKKEEPING, """
local P, id = KEYS[1], ARGV[2]
local mk = P .. ':m:' .. id
local h = redis.call('HMGET', mk, 'e', 'k', 'x')
if h[2] ~= ARGV[3] then return 0 end
redis.call('DEL', mk)
redis.call('ZREM', P .. ':ids', id)
redis.call('ZREM', P .. ':exp', id)
redis.call('ZREM', P .. ':held', id)
return 1
"""),
    "stream": ("""
local P, now, cid, ttl = KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local q = P .. ':q'
local cur = redis.call('HGET', q, 'r') or '0-0'
local got = redis.call('XRANGE', P .. ':st', '(' .. cur, '+', 'COUNT', 1)
if #got == 0 then return {} end
local cexp = tostring(now + ttl)
local out, held = {}, {}
for _, entry in ipairs(got) do
  redis.call('HSET', P .. ':hold', entry[1], cid .. '|' .. cexp .. '|1')
  held[#held + 1], held[#held + 2] = cexp, entry[1]
  out[#out + 1] = entry[1]
end
redis.call('HSET', q, 'r', out[#out])
""" + CLAIM_BOOKKEEPING, """
local P, id = KEYS[1], ARGV[2]
local hold = redis.call('HGET', P .. ':hold', id)
if not hold or string.sub(hold, 1, #ARGV[3]) ~= ARGV[3] then return 0 end
redis.call('XDEL', P .. ':st', id)
redis.call('HDEL', P .. ':hold', id)
redis.call('ZREM', P .. ':held', id)
return 1
"""),
}

SKIP = ("evalsha", "config|resetstat", "flushall", "script|load", "info")


def script_usec(r: redis.Redis, per: int) -> tuple[float, dict]:
    """The usec of EVALSHA since CONFIG RESETSTAT, and of each command run
    inside the scripts, divided by per."""
    stats = r.info("commandstats")
    inner = {k[len("cmdstat_"):]: v["usec"] / per for k, v in stats.items()
             if k[len("cmdstat_"):] not in SKIP}
    return stats["cmdstat_evalsha"]["usec"] / per, inner


def body(size: int) -> str:
    """A JSON message of exactly size bytes, as the benchmarks post."""
    head = '{"event":"x","pad":"'
    return head + "a" * (size - len(head) - 2) + '"}'


def measure(r: redis.Redis, script: str, n: int, batch: int, msg: str) -> dict:
    r.flushall()
    sha = r.script_load(script % {"ttl": TTL_MS})
    r.config_resetstat()
    before = int(r.info("memory")["used_memory"])
    now = int(time.time() * 1000)
    pipe = r.pipeline(transaction=False)
    calls = n // batch
    for k in range(calls):
        args: list = [now]
        for _ in range(batch):
            args += [str(uuid.uuid4()), msg]
        pipe.evalsha(sha, 1, "s:{bench:q}", *args)
        if k % 64 == 63:
            pipe.execute()
    pipe.execute()
    stored = calls * batch
    grown = int(r.info("memory")["used_memory"]) - before
    usec, inner = script_usec(r, stored)
    return {"bytes_per_message": grown / stored, "script_usec_per_message": usec,
            "script_usec_per_call": usec * stored / calls, "command_usec_per_message": inner}


def measure_cycles(r: redis.Redis, claim: str, delete: str, n: int) -> dict:
    """Claims one message and deletes it, n times, on the queue the post
    phase just filled; calls go in pipelines of 64 (the claims, then the
    deletes of what they took)."""
    csha, dsha = r.script_load(claim), r.script_load(delete)
    r.config_resetstat()
    before = int(r.info("memory")["used_memory"])
    now = int(time.time() * 1000)
    done = 0
    for start in range(0, n, 64):
        pipe = r.pipeline(transaction=False)
        cids = [str(uuid.uuid4()) for _ in range(min(64, n - start))]
        for cid in cids:
            pipe.evalsha(csha, 1, "s:{bench:q}", now, cid, 60_000)
        taken = pipe.execute()
        pipe = r.pipeline(transaction=False)
        for cid, ids in zip(cids, taken):
            for mid in ids:
                pipe.evalsha(dsha, 1, "s:{bench:q}", now, mid.decode(), cid)
        done += sum(pipe.execute())
    usec, inner = script_usec(r, max(done, 1))
    return {"cycles": done, "script_usec_per_cycle": usec,
            "bytes_freed_per_cycle": (before - int(r.info("memory")["used_memory"])) / max(done, 1),
            "command_usec_per_cycle": inner}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=40_000, help="messages stored per layout and batch size")
    ap.add_argument("--batches", default="1,8", help="messages per script call, comma-separated")
    ap.add_argument("--msg-size", type=int, default=1024, help="bytes of message JSON")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=20_000,
                    help="claim 1 + delete cycles after the post phase of the last batch size")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    msg = body(args.msg_size)
    results: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "loadavg_start": os.getloadavg(), "messages": args.messages,
                     "msg_size": args.msg_size, "runs": []}
    with tempfile.TemporaryDirectory(prefix="sluice-layout-") as tmp:
        with RedisServer(Path(tmp) / "redis") as server:
            r = redis.Redis(port=server.port)
            for rnd in range(args.rounds):
                for batch in batches:
                    for name, script in LAYOUTS.items():
                        m = measure(r, script, args.messages, batch, msg)
                        m.update(layout=name, batch=batch, round=rnd + 1)
                        cmds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(m["command_usec_per_message"].items()))
                        print(f"round {rnd + 1} batch {batch:2d} {name:16s} {m['bytes_per_message']:7,.0f} B/msg"
                              f"  script {m['script_usec_per_message']:6.2f} us/msg"
                              f" ({m['script_usec_per_call']:7.2f} us/call)  inside: {cmds}", flush=True)
                        if name in CYCLES and batch == batches[-1]:
                            c = measure_cycles(r, *CYCLES[name], min(args.cycles, args.messages))
                            m["claim_delete"] = c
                            cmds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(c["command_usec_per_cycle"].items()))
                            print(f"round {rnd + 1} claim 1 + delete {name:16s} {c['cycles']:,} cycles"
                                  f"  script {c['script_usec_per_cycle']:6.2f} us/cycle"
                                  f"  {c['bytes_freed_per_cycle']:7,.0f} B freed/cycle  inside: {cmds}", flush=True)
                        results["runs"].append(m)
    results["loadavg_end"] = os.getloadavg()
    print(f"load average {results['loadavg_start'][0]:.2f} at the start, {results['loadavg_end'][0]:.2f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
