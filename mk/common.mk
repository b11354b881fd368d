# Shared by the part fragments: the paths more than one part uses and the
# shell idioms written once. A fragment that uses any of these includes this
# file itself (`include $(ROOT)/mk/common.mk`); the guard makes a second
# include free. Fragments use nothing of another part's fragment but its
# targets as prerequisites.
ifndef SLUICE_COMMON_MK
SLUICE_COMMON_MK := 1

# The cluster of SLUICE_INSTANCE (docs/cluster.md): computed here only, and
# exported so the scripts make runs (e2e/chart, e2e/smoke) use the same one.
KUBECONFIG_PATH := $(BUILD)/kube$(if $(filter-out 0,$(SLUICE_INSTANCE)),-$(SLUICE_INSTANCE))/kubeconfig
KUBECTL         := $(BIN)/kubectl
export KUBECONFIG_PATH

# Tools and virtualenvs one part builds and others run: the rule that makes
# each lives with its part (helm: chart.mk, venv-operator: operator.mk,
# venv-compat: compat.mk), its path lives here.
gomod_version = $(shell awk '$$1 == "$(1)" {print $$2} $$1 == "require" && $$2 == "$(1)" {print $$3}' $(2))
HELM_VERSION  := $(call gomod_version,helm.sh/helm/v3,$(ROOT)/e2e/tools/helm/go.mod)
HELM          := $(CACHE)/helm-$(HELM_VERSION)/helm
OPERATOR_VENV := $(BUILD)/venv-operator
OPERATOR_PY   := $(OPERATOR_VENV)/bin/python
COMPAT_VENV   := $(BUILD)/venv-compat
COMPAT_PY     := $(COMPAT_VENV)/bin/python

# with-teardown SETUP,CMD,TEARDOWN: run SETUP then CMD, always run
# TEARDOWN, and exit with the first failure's code (TEARDOWN's failure
# counts only when everything before it passed).
define with-teardown
rc=0; $(1) && ( $(2) ) || rc=$$?; \
$(3) || { [ $$rc -ne 0 ] || rc=1; }; \
exit $$rc
endef

# with-controlplane CMD: run CMD against the running cluster when there is
# one; else bring the control-plane-only cluster up for it and down after,
# whatever CMD's outcome.
define with-controlplane
if $(KUBECTL) --kubeconfig $(KUBECONFIG_PATH) get --raw /readyz >/dev/null 2>&1; then \
  echo "==> using the running cluster at $(KUBECONFIG_PATH)"; $(1); \
else \
  $(call with-teardown,$(MAKE) --no-print-directory controlplane-up,$(1),$(MAKE) --no-print-directory controlplane-down); \
fi
endef

endif
