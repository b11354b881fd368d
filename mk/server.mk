# sluice-server: the Zaqar v2 data plane (Go module in server/).
APT_PACKAGES  += redis-server python3-venv
TEST_TARGETS  += test-server

# The mailto delivery tests mail through a real SMTP server process:
# aiosmtpd in a small venv, cached per pinned version.
AIOSMTPD_VERSION := 1.4.6
SMTP_VENV        := $(CACHE)/venv-smtp-aiosmtpd-$(AIOSMTPD_VERSION)
export SLUICE_SMTP_PYTHON := $(SMTP_VENV)/bin/python

FUZZTIME ?= 30s
SERVER_FUZZ_TARGETS = FuzzPostMessages FuzzClaimBody FuzzQueueMetadata FuzzPatch \
	FuzzListQuery FuzzHeaders FuzzAppendString FuzzRequest FuzzPostFastPath FuzzSubscriptionBody

.PHONY: build-server test-server fuzz-server run-server venv-smtp
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

test-server: deps-apt venv-smtp ## unit, conformance (memory + real redis-server), HTTP API and fuzz-seed tests
	cd server && $(GO) vet ./... && $(GO) test -race -count=1 -p 2 ./...

fuzz-server: ## fuzz every request parser for FUZZTIME each (default 30s)
	cd server && for f in $(SERVER_FUZZ_TARGETS); do \
	  $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./internal/api/ || exit 1; done

run-server: build-server ## run sluice-server on 127.0.0.1:8888 with the memory store
	$(BIN)/sluice-server --listen 127.0.0.1:8888 --store memory
