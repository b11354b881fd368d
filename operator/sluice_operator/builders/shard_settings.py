"""Redis settings of every shard sluice provisions. Plain Python with no imports:
the test harness and benchmarks (e2e/testsupport/harness.py) load this file to run
Redis as it is deployed."""

# The settings every Redis shard sluice provisions runs with (builtin on the command
# line, redis-operator through its external config file). A stored message is a
# hash holding a ~1 KiB body; Redis keeps a hash whose values are all under
# hash-max-listpack-value (default 64 bytes) as one listpack instead of a hash
# table of separately allocated fields, which saves about 190 bytes (9 %) of a
# 1 KiB message; Redis CPU per request is unchanged at saturation, and a claim
# (which rewrites the listpack) may cost a few per cent more at light load
# (docs/benchmarks.md). Larger bodies fall back to a hash table, as every hash
# does by default.
# A queue must never lose a message it acknowledged, so a full shard refuses
# writes (noeviction, which sluice-server answers with 507) instead of deleting
# keys to make room as every other maxmemory-policy does (volatile-* policies
# too: messages carry a TTL).
REDIS_SHARD_SETTINGS = (("hash-max-listpack-value", "2048"), ("maxmemory-policy", "noeviction"))

# The one policy a shard may run with (a shard that reports another is refused).
SAFE_EVICTION_POLICY = "noeviction"

# maxmemory is this share of the container's memory limit. Redis counts its data
# and client buffers against maxmemory, but the container's limit (which the OOM
# killer enforces) also has to hold what Redis does not count: the output buffer
# of a replica in full sync and the AOF buffer (excluded from maxmemory by Redis
# itself), allocator fragmentation, and the AOF rewrite's forked child, whose
# copy-on-write pages are charged to the same cgroup for every page the parent
# writes during the rewrite. ElastiCache reserves 25 % of a node for the same
# reasons (reserved-memory-percent); a queue shard writes on every post, claim and
# delete, so a rewrite copies more of its pages than a cache's would, and in a
# small container (256Mi) Redis's own few MiB weigh more: 30 % is kept back.
MAXMEMORY_PERCENT = 70
MIB = 1024 * 1024


def maxmemory_bytes(limit_bytes: int) -> int:
    """maxmemory_bytes is the maxmemory of a shard whose container may use limit_bytes:
    MAXMEMORY_PERCENT of it, rounded down to whole MiB (a value that reads plainly in
    CONFIG GET and status). Never 0, which Redis reads as no limit: a limit too small
    for a whole MiB (no Redis runs in one) gets the share in bytes."""
    share = limit_bytes * MAXMEMORY_PERCENT // 100
    whole = share - share % MIB
    return whole if whole else max(share, 1)
