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
REDIS_SHARD_SETTINGS = (("hash-max-listpack-value", "2048"),)
