# sluice-bench: the load generator (Go module in bench-job/). See
# docs/sluice-bench.md. Tests run against a real sluice-server (memory and a
# real redis-server); the benchmark compares it with zaqar-bench. The report
# test opens report.html in headless Chromium.
include $(ROOT)/mk/common.mk

APT_PACKAGES  += redis-server chromium-headless-shell fonts-dejavu-core
TEST_TARGETS  += test-bench
BENCH_TARGETS += bench-generator

# BENCH_GEN_ARGS passes options to the driver, e.g. "--seconds 10 --workers 10,50".
BENCH_GEN_ARGS ?=

.PHONY: build-bench test-bench bench-generator
build-bench: ## build sluice-bench (static) into build/bin
	@mkdir -p $(BIN)
	cd bench-job && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/sluice-bench ./cmd/sluice-bench

test-bench: deps-apt build-server ## sluice-bench unit tests + runs against sluice-server (memory and real redis)
	cd bench-job && $(GO) vet ./... && \
	  SLUICE_SERVER_BIN=$(BIN)/sluice-server $(GO) test -race -count=1 -p 2 -timeout 20m ./...

bench-generator: deps-apt build-bench build-noop venv-compat ## sluice-bench vs zaqar-bench: requests per client CPU-second against the no-op server
	$(PYTHON) bench-job/scripts/bench_generator.py --bin $(BIN) --zaqar-bench $(BUILD)/venv-compat/bin/zaqar-bench \
	  --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_GEN_ARGS)

# Notifications (docs/benchmarks.md): POST throughput with and without one
# webhook subscriber, and post -> webhook latency at light load, for
# sluice-server on Redis and the real Zaqar 23.0.1 in the same run.
# BENCH_NOTIFY_ARGS passes options, e.g. "--seconds 5 --targets sluice-redis".
BENCH_TARGETS += bench-notifications
BENCH_NOTIFY_ARGS ?=
.PHONY: bench-notifications
bench-notifications: deps-apt build-server build-bench venv-compat ## webhook subscriber cost and delivery latency, sluice vs Zaqar 23.0.1
	$(COMPAT_PY) e2e/bench/bench_notifications.py --bin $(BIN) --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_NOTIFY_ARGS)

# Redis client transports (docs/benchmarks.md): what one function call costs
# the client through go-redis, go-redis pipelines from a sender goroutine
# (how the server's group commit sends) and rueidis' automatic pipelining.
# BENCH_REDIS_CLIENT_ARGS: rounds, seconds per run, concurrent callers.
BENCH_TARGETS += bench-redis-client
BENCH_REDIS_CLIENT_ARGS ?= 2 5 32
.PHONY: bench-redis-client
bench-redis-client: deps-apt ## Redis client transports side by side: client and redis-server CPU per call
	@mkdir -p $(BIN)
	cd e2e/bench/redisclient && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/redisclient-bench .
	$(PYTHON) e2e/bench/redisclient/compare.py $(BIN)/redisclient-bench $(BENCH_REDIS_CLIENT_ARGS) | tee $(BUILD)/bench-redis-client.txt

# BENCH_LAYOUT_ARGS passes options, e.g. BENCH_LAYOUT_ARGS="--batches 1,8,32".
BENCH_TARGETS += bench-redis-layout
.PHONY: bench-redis-layout
bench-redis-layout: deps-apt venv-compat ## Redis memory and script time per stored 1 KiB message: a hash per message vs stream entries (the driver's layout)
	$(COMPAT_PY) e2e/bench/bench_redis_layout.py --json $(BUILD)/bench-redis-layout.json $(BENCH_LAYOUT_ARGS)
