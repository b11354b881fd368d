# The Helm chart (charts/sluice) and its tests (e2e/chart). helm, promtool and
# prometheus are built from their Go modules, pinned in the small wrapper
# modules e2e/tools/{helm,promtool}, into the cache keyed by version: the
# first build takes minutes, later ones are free until the pin changes.
include $(ROOT)/mk/common.mk

TEST_TARGETS += test-chart

# The pins live in one place each: the wrapper modules' go.mod (helm's path
# is in common.mk: make up and make e2e run it too).
PROM_VERSION  := $(call gomod_version,github.com/prometheus/prometheus,$(ROOT)/e2e/tools/promtool/go.mod)

PROMTOOL      := $(CACHE)/prometheus-$(PROM_VERSION)/promtool
PROMETHEUS    := $(CACHE)/prometheus-$(PROM_VERSION)/prometheus
CHART         := $(ROOT)/charts/sluice
export SLUICE_HELM := $(HELM)
export SLUICE_PROMTOOL := $(PROMTOOL)
export SLUICE_PROMETHEUS := $(PROMETHEUS)

# The operator's own RBAC manifest: the chart's ClusterRole rules are a copy
# of it.
OPERATOR_RBAC := $(ROOT)/operator/deploy/rbac.yaml
# Its opt-in roles for Benchmark drains: the chart binds them only when asked.
OPERATOR_RBAC_FAULTS := $(ROOT)/operator/deploy/rbac-faults.yaml

.PHONY: helm promtool prometheus chart-tools chart-sync chart-docs test-chart test-chart-cluster chart-cluster-suite
deps: chart-tools
chart-tools: helm promtool prometheus ## build helm, promtool and prometheus (pinned Go modules) into the cache

helm: $(HELM)
# Like helm's own Makefile: the default Kubernetes version that `helm
# template` and `helm lint` assume follows the client-go helm is built with.
$(HELM):
	@mkdir -p $(dir $@)
	@echo "==> building helm $(HELM_VERSION) from its Go module (once per version)"
	cd e2e/tools/helm && kv=$$($(GO) list -f '{{.Version}}' -m k8s.io/client-go) && kv=$${kv#v} && \
	  major=$$(( $${kv%%.*} + 1 )) && minor=$$(echo $$kv | cut -d. -f2) && \
	  $(GO) build -trimpath -o $@.tmp -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$$major -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$minor \
	    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$$major -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$minor" \
	  helm.sh/helm/v3/cmd/helm
	mv $@.tmp $@

# plugins/plugins.go only registers the cloud service discoveries (AWS,
# Azure, GCE, ...), which are most of the build. The build uses a copy of the
# Prometheus module without that file (file and HTTP discovery stay, from
# minimum.go; the tests scrape static targets), wired in by a replace in a
# copy of the wrapper module; every other dependency keeps its go.sum pin.
PROM_SRC := $(CACHE)/prometheus-$(PROM_VERSION)/src
$(PROM_SRC)/.stamp: $(ROOT)/e2e/tools/promtool/go.mod $(ROOT)/e2e/tools/promtool/go.sum
	rm -rf $(PROM_SRC) && mkdir -p $(PROM_SRC)/wrap
	cd e2e/tools/promtool && $(GO) mod download github.com/prometheus/prometheus && \
	  cp -r "$$($(GO) list -m -f '{{.Dir}}' github.com/prometheus/prometheus)" $(PROM_SRC)/prometheus
	chmod -R u+w $(PROM_SRC)/prometheus && rm $(PROM_SRC)/prometheus/plugins/plugins.go
	cp e2e/tools/promtool/go.mod e2e/tools/promtool/go.sum e2e/tools/promtool/tools.go $(PROM_SRC)/wrap/
	cd $(PROM_SRC)/wrap && $(GO) mod edit -replace github.com/prometheus/prometheus=../prometheus
	@touch $@

promtool: $(PROMTOOL)
$(PROMTOOL): | $(PROM_SRC)/.stamp
	@echo "==> building promtool $(PROM_VERSION) from its Go module (once per version)"
	cd $(PROM_SRC)/wrap && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $@.tmp github.com/prometheus/prometheus/cmd/promtool
	mv $@.tmp $@

prometheus: $(PROMETHEUS)
$(PROMETHEUS): | $(PROM_SRC)/.stamp
	@echo "==> building prometheus $(PROM_VERSION) from its Go module (once per version)"
	cd $(PROM_SRC)/wrap && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $@.tmp github.com/prometheus/prometheus/cmd/prometheus
	mv $@.tmp $@

chart-sync: ## copy crds/ (and the operator's RBAC manifest) into the chart
	@mkdir -p $(CHART)/files/crds
	rm -f $(CHART)/files/crds/*.yaml
	cp $(ROOT)/crds/*.yaml $(CHART)/files/crds/
	cp $(OPERATOR_RBAC) $(CHART)/files/operator-rbac.yaml
	cp $(OPERATOR_RBAC_FAULTS) $(CHART)/files/operator-rbac-faults.yaml

chart-docs: ## regenerate the values table in charts/sluice/README.md from values.yaml
	cd e2e/chart && $(GO) run ./cmd/valuesdoc $(CHART)

test-chart: helm promtool prometheus build-server venv-operator ## helm lint/template/schema, CRD+RBAC sync, values table, alert rules on a real scrape
	cd e2e/chart && $(GO) vet ./... && SLUICE_SERVER_BIN=$(BIN)/sluice-server SLUICE_OPERATOR_PY=$(OPERATOR_PY) SLUICE_OPERATOR_RBAC=$(OPERATOR_RBAC) \
	  $(GO) test -count=1 -skip '^TestCluster' ./...

# Against a real apiserver: the running cluster, else the local control plane
# brought up for the suite and taken down again (make test runs these tests
# in test-controlplane, next to the operator's integration suite).
test-chart-cluster: helm ## server-side dry-run of the chart and examples/, install -> upgrade -> uninstall on the local control plane
	@$(call with-controlplane,$(MAKE) --no-print-directory chart-cluster-suite)

chart-cluster-suite: helm
	cd e2e/chart && SLUICE_KUBECONFIG=$(KUBECONFIG_PATH) SLUICE_KUBECTL=$(KUBECTL) \
	  $(GO) test -count=1 -v -run '^TestCluster' . 2>&1 | grep -E '^(=== RUN|--- |\s+\w+_test.go|ok|FAIL|PASS)'
