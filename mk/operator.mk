# sluice-operator (Python/Kopf, operator/) and the CRDs (crds/).
include $(ROOT)/mk/common.mk

APT_PACKAGES  += redis-server
TEST_TARGETS  += test-operator

# The venv is rebuilt when the pinned requirements change.
OPERATOR_STAMP := $(OPERATOR_VENV)/.stamp-$(shell cat $(ROOT)/operator/requirements*.txt $(ROOT)/operator/pyproject.toml 2>/dev/null | md5sum | cut -c1-12)

.PHONY: mongodb-operator-binary cert-manager-binary venv-operator test-operator lint-operator test-operator-integration operator-integration-suite test-controlplane run-operator crd-docs bench-operator test-operator-e2e

venv-operator: $(OPERATOR_STAMP) ## virtualenv for the operator and its tests (build/venv-operator)
$(OPERATOR_STAMP):
	rm -rf $(OPERATOR_VENV)
	$(PYTHON) -m venv $(OPERATOR_VENV)
	$(OPERATOR_PY) -m pip install -q --disable-pip-version-check -r operator/requirements-dev.txt
	$(OPERATOR_PY) -m pip install -q --disable-pip-version-check --no-deps -e operator
	@touch $@

lint-operator: venv-operator ## ruff and mypy on the operator
	cd operator && $(OPERATOR_VENV)/bin/ruff check . && $(OPERATOR_VENV)/bin/ruff format --check . && $(OPERATOR_VENV)/bin/mypy

test-operator: deps-apt venv-operator lint-operator build-bench build-server ## operator unit tests (builders, logic, CRD schemas, probes on a real redis-server)
	cd operator && $(OPERATOR_PY) -m pytest -q tests/unit

# Real apiserver, controller-manager, scheduler and kwok nodes: uses the
# running cluster (either mode), else brings the control-plane-only mode up
# for the suite and takes it down again, also when the suite fails.
# The MongoDB community operator's controller (e2e/mongodb-operator, pinned
# release), which the integration suite runs against the control plane.
mongodb-operator-binary: ## build the MongoDB community operator controller (cached by version in ~/.cache/sluice)
	@$(ROOT)/e2e/cluster/build-tool.sh mongodb-operator . mongodb-operator github.com/mongodb/mongodb-kubernetes-operator

# cert-manager's controllers (e2e/cert-manager, pinned release) and the CRDs of
# that release (its module's deploy/crds, into build/cert-manager/crds), which
# the integration suite runs against the control plane.
cert-manager-binary: ## build cert-manager's controllers (cached by version in ~/.cache/sluice) and stage its CRDs
	@$(ROOT)/e2e/cluster/build-tool.sh cert-manager . cert-manager github.com/cert-manager/cert-manager
	@rm -rf $(BUILD)/cert-manager/crds && mkdir -p $(BUILD)/cert-manager/crds
	@cp "$$(cd e2e/cert-manager && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"/deploy/crds/cert-manager.io_*.yaml $(BUILD)/cert-manager/crds/

test-operator-integration: deps-apt venv-operator build-server build-bench mongodb-operator-binary cert-manager-binary ## operator against a real apiserver + scheduler + kwok nodes
	@$(call with-controlplane,$(MAKE) --no-print-directory operator-integration-suite)

operator-integration-suite: venv-operator
	cd operator && KUBECONFIG=$(KUBECONFIG_PATH) $(OPERATOR_PY) -m pytest -q --durations=8 tests/integration

# Every suite that needs a real apiserver but no kubelet, on one control-plane
# bring-up: the operator's integration suite, the chart's cluster tests and
# the server's ServiceAccount token checks. All run even when one fails; the
# control plane always goes down.
TEST_TARGETS += test-controlplane
test-controlplane: deps-apt venv-operator build-server build-bench helm mongodb-operator-binary cert-manager-binary ## operator integration + chart cluster tests on one control-plane-only cluster
	@$(call with-controlplane,rc=0; \
	  $(MAKE) --no-print-directory operator-integration-suite || rc=$$?; \
	  $(MAKE) --no-print-directory chart-cluster-suite || rc=$$?; \
	  $(MAKE) --no-print-directory server-kube-suite || rc=$$?; \
	  exit $$rc)

run-operator: venv-operator ## run the operator locally against the cluster (build/kube/kubeconfig)
	KUBECONFIG=$(KUBECONFIG_PATH) $(OPERATOR_VENV)/bin/sluice-operator

crd-docs: venv-operator ## regenerate docs/crds.md from crds/
	$(OPERATOR_PY) -m sluice_operator.crddoc crds > docs/crds.md.tmp && mv docs/crds.md.tmp docs/crds.md

BENCH_TARGETS += bench-operator
bench-operator: venv-operator build-server ## Pool/Queue apply->Ready and operator RSS with QUEUES (100) Queues, on the running cluster
	cd operator && KUBECONFIG=$(KUBECONFIG_PATH) $(OPERATOR_PY) bench/operator_bench.py

BENCH_TARGETS += bench-redis-operator
.PHONY: bench-redis-operator
bench-redis-operator: venv-operator ## Pools of SHARDS (3) shards by the real redis-operator: apply -> Ready (replicas 1 and REPLICAS), failover time (after make up)
	cd operator && KUBECONFIG=$(KUBECONFIG_PATH) $(OPERATOR_PY) bench/redis_operator_bench.py

# The end-to-end suite needs the operator the chart installs: make e2e
# (mk/up.mk) installs it, runs tests/e2e, and checks the uninstall.
test-operator-e2e: e2e ## the same as make e2e
