# sluice: one Makefile that ties the parts together. Each part keeps its own
# targets in mk/<part>.mk and adds itself to TEST_TARGETS, APT_PACKAGES and
# friends, so parts evolve without touching each other's rules; what several
# parts share is in mk/common.mk, which each of them includes explicitly.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT   := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD  := $(ROOT)/build
BIN    := $(BUILD)/bin
# Survives across clones on one machine: expensive builds (Kubernetes,
# FerretDB, Zaqar's virtualenv) are cached here, keyed by their pinned version.
CACHE  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sluice
GO     ?= go
PYTHON ?= python3

export GOFLAGS := -buildvcs=false
export SLUICE_BUILD := $(BUILD)
export SLUICE_CACHE := $(CACHE)

# Parts append to these.
APT_PACKAGES :=
TEST_TARGETS :=
BENCH_TARGETS :=
# The suites test-e2e runs on the cluster it brings up (mk/cluster.mk).
E2E_SUITES :=

include $(filter-out mk/common.mk,$(sort $(wildcard mk/*.mk)))

.PHONY: help deps deps-apt test bench up down
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# Install the Debian packages every part asked for; a stamp keyed by the
# package list makes the second run free.
APT_STAMP = $(BUILD)/.apt-$(shell echo $(sort $(APT_PACKAGES)) | md5sum | cut -c1-12)
deps-apt: $(APT_STAMP)
$(APT_STAMP):
	@mkdir -p $(BUILD)
	@missing=$$(for p in $(sort $(APT_PACKAGES)); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "==> apt-get install $$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@touch $@

deps: deps-apt ## install what the tests need (Debian packages, venvs, Go modules)

test: deps $(TEST_TARGETS) ## run every test suite (installs what it needs)
	@echo "==> all test suites passed: $(TEST_TARGETS)"

bench: $(BENCH_TARGETS) ## run every benchmark
