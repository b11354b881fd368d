# sluice-server: the Zaqar v2 data plane (Go module in server/).
include $(ROOT)/mk/common.mk

APT_PACKAGES  += redis-server python3-venv
TEST_TARGETS  += test-server

# The mailto delivery tests mail through a real SMTP server process:
# aiosmtpd in a small venv, cached per pinned version.
AIOSMTPD_VERSION := 1.4.6
SMTP_VENV        := $(CACHE)/venv-smtp-aiosmtpd-$(AIOSMTPD_VERSION)
export SLUICE_SMTP_PYTHON := $(SMTP_VENV)/bin/python

FUZZTIME ?= 30s
SERVER_FUZZ_TARGETS = FuzzPostMessages FuzzClaimBody FuzzQueueMetadata FuzzPatch \
	FuzzListQuery FuzzHeaders FuzzAppendString FuzzRequest FuzzPostFastPath \
	FuzzRouter FuzzCheckJSON FuzzSubscriptionBody FuzzLeanParse

.PHONY: build-server test-server fuzz-server fuzz-model fuzz run-server venv-smtp
build-server: ## build sluice-server into build/bin
	@mkdir -p $(BIN)
	cd server && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/sluice-server ./cmd/sluice-server

# The fuzz targets' seed corpora (server/internal/api/testdata/fuzz) run as
# ordinary tests here; fuzz-server explores beyond them.
deps: venv-smtp
venv-smtp: $(SMTP_VENV)/.installed ## aiosmtpd (the SMTP server of the mailto tests) in a cached venv
$(SMTP_VENV)/.installed:
	@mkdir -p $(dir $(SMTP_VENV))
	@test -x $(SMTP_VENV)/bin/python || $(PYTHON) -m venv $(SMTP_VENV)
	$(SMTP_VENV)/bin/python -m pip install -q --disable-pip-version-check aiosmtpd==$(AIOSMTPD_VERSION)
	@touch $@

# Under -race sockio makes its socket calls through the syscall package
# (internal/sockio/syscalls_race.go), so the raw calls the server runs in
# production are tested by a run without it: sockio's own tests and the
# lean loop's, whose connections are real sockets.
SOCKIO_LEAN_TESTS := ^(TestLeanAndNetHTTPAnswerAlike|TestSlowClientsAreCut|TestHandoversCounted)$$

test-server: deps-apt venv-smtp ## unit, conformance (memory + real redis-server), HTTP API and fuzz-seed tests
	cd server && $(GO) vet ./... && $(GO) test -race -count=1 -p 2 -skip '^TestRealAPIServer$$' ./... && \
	  $(GO) test -count=1 ./internal/sockio/ && \
	  $(GO) test -count=1 -run '$(SOCKIO_LEAN_TESTS)' ./internal/api/

# ServiceAccount tokens the real kube-apiserver issues, validated against its
# own discovery document and keys. make test runs it in test-controlplane
# (mk/operator.mk), on the control plane the operator's suites use;
# test-server-kube brings one up for it alone.
.PHONY: server-kube-suite test-server-kube
server-kube-suite:
	cd server && SLUICE_KUBECONFIG=$(KUBECONFIG_PATH) SLUICE_KUBECTL=$(KUBECTL) \
	  $(GO) test -count=1 -v -run '^TestRealAPIServer$$' ./internal/auth/

test-server-kube: ## the server's ServiceAccount token validation against a real apiserver (the running cluster, else the local control plane)
	@$(call with-controlplane,$(MAKE) --no-print-directory server-kube-suite)

fuzz-server: ## fuzz every request parser for FUZZTIME each (default 30s)
	cd server && for f in $(SERVER_FUZZ_TARGETS); do \
	  $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./internal/api/ || exit 1; done

# The differential test runs a few dozen sequences per driver in
# test-server; fuzz-model runs MODEL_CHECKS per driver (rapid's -rapid.checks).
MODEL_CHECKS ?= 2000
MODEL_PACKAGES = ./internal/storage/memory/ ./internal/storage/redis/ \
	./internal/storage/mongo/ ./internal/storage/pooling/
fuzz-model: deps-apt ## every driver against the reference model for MODEL_CHECKS random sequences each (default 2000)
	cd server && $(GO) test -count=1 -p 1 -timeout 0 -v -run '^TestModel$$' $(MODEL_PACKAGES) -args -rapid.checks=$(MODEL_CHECKS)

fuzz: fuzz-model fuzz-server ## the long runs: the model-based differential test, then every fuzz target

run-server: build-server ## run sluice-server on 127.0.0.1:8888 with the memory store
	$(BIN)/sluice-server --listen 127.0.0.1:8888 --store memory

# Where a request's CPU goes (docs/benchmarks.md): server, redis-server and
# client CPU per 1,000 requests at a fixed offered rate, Redis commandstats
# and memory per message, pprof tops. BENCH_PROFILE_ARGS passes options,
# e.g. "--baseline build/bench-profile-before.json" for a before/after table.
BENCH_TARGETS += bench-profile
APT_PACKAGES  += wrk
BENCH_PROFILE_ARGS ?=
# User-space instructions per request (callgrind), exact whatever the load:
# the figure a hot-path change is judged by. BENCH_INSTR_ARGS passes
# options, e.g. "--baseline FILE.json" or "--server OTHER".
BENCH_TARGETS += bench-instructions
APT_PACKAGES  += valgrind
BENCH_INSTR_ARGS ?=
.PHONY: bench-instructions
bench-instructions: deps-apt build-server ## user-space instructions per POST and per claim/delete request (valgrind callgrind, one connection)
	$(PYTHON) e2e/bench/instructions.py --server $(BIN)/sluice-server --json $(BUILD)/bench-instructions.json $(BENCH_INSTR_ARGS)

BENCH_TARGETS += bench-idle-rss
BENCH_IDLE_ARGS ?=
.PHONY: bench-idle-rss
bench-idle-rss: deps-apt build-server ## idle server RSS (anonymous and file-backed) from 1 s after start to past the first forced GC; BENCH_IDLE_ARGS="--server OTHER" compares
	$(PYTHON) e2e/bench/idle_rss.py --server $(BIN)/sluice-server $(BENCH_IDLE_ARGS)

.PHONY: bench-profile
bench-profile: deps-apt build-server build-noop ## CPU per request by process (and of the no-op HTTP server), Redis cost per call and per message, pprof tops (fixed rate, loopback)
	GO=$(GO) $(PYTHON) e2e/bench/bench_profile.py --server $(BIN)/sluice-server --noop --json $(BUILD)/bench-profile.json \
	  --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_PROFILE_ARGS)
