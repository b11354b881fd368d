# Compatibility with OpenStack Zaqar: the unchanged python-zaqarclient and
# zaqar-bench against sluice-server, and sluice-server vs the real Zaqar
# 23.0.1 side by side (make bench-server). See docs/compat.md.
include $(ROOT)/mk/common.mk

APT_PACKAGES  += redis-server wrk gcc
TEST_TARGETS  += test-compat
BENCH_TARGETS += bench-server bench-auth bench-encryption

COMPAT_REQ  := $(ROOT)/e2e/compat/requirements.txt
# The stamp is keyed by the requirements file, so editing a pin reinstalls
# and a second run with the same pins costs nothing.
COMPAT_STAMP = $(COMPAT_VENV)/.installed-$(shell md5sum < $(COMPAT_REQ) | cut -c1-12)
NOOP_BIN    := $(BIN)/noop-http
# The real Keystone for the --auth keystone tests, in a venv of its own:
# its pins differ from the client's.
KEYSTONE_VENV  := $(BUILD)/venv-keystone
KEYSTONE_REQ   := $(ROOT)/e2e/keystone/requirements.txt
KEYSTONE_STAMP = $(KEYSTONE_VENV)/.installed-$(shell md5sum < $(KEYSTONE_REQ) | cut -c1-12)

.PHONY: venv-compat venv-keystone test-compat bench-server bench-auth bench-encryption build-noop
venv-compat: $(COMPAT_STAMP) ## python-zaqarclient, zaqar 23.0.1 (zaqar-bench, uwsgi), pytest in build/venv-compat

$(COMPAT_STAMP): $(COMPAT_REQ)
	@test -x $(COMPAT_PY) || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_PY) -m pip install -q --disable-pip-version-check -r $(COMPAT_REQ)
	@rm -f $(COMPAT_VENV)/.installed-*
	@touch $@

venv-keystone: $(KEYSTONE_STAMP) ## Keystone 30.0.0 (SQLite, fernet) for the Keystone auth tests, in build/venv-keystone

$(KEYSTONE_STAMP): $(KEYSTONE_REQ)
	@test -x $(KEYSTONE_VENV)/bin/python || $(PYTHON) -m venv $(KEYSTONE_VENV)
	$(KEYSTONE_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(KEYSTONE_REQ)
	@rm -f $(KEYSTONE_VENV)/.installed-*
	@touch $@

build-noop: ## the no-op Go HTTP handler used as the HTTP ceiling
	@mkdir -p $(BIN)
	cd e2e/bench/noop && $(GO) build -trimpath -o $(NOOP_BIN) .

test-compat: deps-apt build-server venv-compat venv-keystone ferretdb ## zaqarclient + zaqar-bench against sluice-server (memory and redis stores, Keystone auth; COMPAT_TARGETS=mongo adds FerretDB)
	SLUICE_BIN=$(BIN) KEYSTONE_VENV=$(KEYSTONE_VENV) $(COMPAT_PY) -m pytest -q -p no:cacheprovider -rfEsxX e2e/compat

# BENCH_ARGS passes options to the driver, e.g. BENCH_ARGS="--duration 5"
# or BENCH_ARGS="--targets noop,sluice-redis,zaqar".
bench-server: deps-apt build-server build-noop venv-compat ## sluice-server vs Zaqar 23.0.1 vs no-op HTTP (wrk), table into docs/benchmarks.md
	SLUICE_BIN=$(BIN) $(COMPAT_PY) e2e/bench/bench_server.py --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_ARGS)

bench-auth: deps-apt build-server venv-compat venv-keystone ## POST throughput with Keystone auth on (token cached) vs off, table into docs/benchmarks.md
	SLUICE_BIN=$(BIN) KEYSTONE_VENV=$(KEYSTONE_VENV) $(COMPAT_PY) e2e/bench/bench_auth.py --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_ARGS)

# The token comes from the running cluster (build/kube/kubeconfig) when it
# answers, else from an issuer the script runs itself; with the cluster it
# also compares first-sight validation, offline against TokenReview.
BENCH_TARGETS += bench-auth-kube
.PHONY: bench-auth-kube
bench-auth-kube: deps-apt build-server venv-compat ## POST throughput with --auth kubernetes (token cached) vs off, first-sight JWKS vs TokenReview, table into docs/benchmarks.md
	SLUICE_BIN=$(BIN) SLUICE_KUBECONFIG=$(KUBECONFIG_PATH) SLUICE_KUBECTL=$(KUBECTL) \
	  $(COMPAT_PY) e2e/bench/bench_auth.py --mode kubernetes --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_ARGS)

bench-encryption: deps-apt build-server venv-compat ## POST and claim+delete on a queue with _enable_encrypt_messages vs one without (wrk, one Redis), table into docs/benchmarks.md
	SLUICE_BIN=$(BIN) $(COMPAT_PY) e2e/bench/bench_encryption.py --write-doc $(ROOT)/docs/benchmarks.md $(BENCH_ARGS)
