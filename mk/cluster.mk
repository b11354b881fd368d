# Cluster bring-up (e2e/cluster, e2e/kind), images (e2e/images) and the
# end-to-end smoke test (e2e/smoke). See docs/cluster.md.
#   CLUSTER=local (default): a real single-node Kubernetes on this machine,
#                            no Docker; needs root.
#   CLUSTER=kind:            kind on Docker (same node labels, image names).
APT_PACKAGES += etcd-server containerd runc containernetworking-plugins iptables \
                buildah conntrack iproute2 debootstrap mmdebstrap curl openssl util-linux \
                procps gcc libc6-dev ca-certificates python3-venv

include $(ROOT)/mk/common.mk

TEST_TARGETS += test-e2e

CLUSTER ?= local
E2E_CLUSTER := $(ROOT)/e2e/cluster
# The full local cluster runs the real redis-operator as a host process
# (e2e/cluster/redis-operator.sh); REDIS_OPERATOR=0 leaves it out.
REDIS_OPERATOR ?= 1

.PHONY: cluster-binaries controlplane-binaries cluster-base-images cluster-up cluster-down \
        controlplane-up controlplane-down images e2e-smoke test-e2e cluster-status \
        redis-operator-binary redis-operator-up redis-operator-down

controlplane-binaries: ## build Kubernetes and kwok (cached by pinned version in $(CACHE))
	@$(E2E_CLUSTER)/build-kubernetes.sh
	@$(E2E_CLUSTER)/build-tool.sh kwok sigs.k8s.io/kwok/cmd/kwok kwok sigs.k8s.io/kwok

cluster-binaries: controlplane-binaries ## also CoreDNS and the CRI reset tool
	@$(E2E_CLUSTER)/build-tool.sh coredns . coredns github.com/coredns/coredns
	@cd e2e/k8s && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/cri-reset ./cmd/cri-reset

cluster-base-images: cluster-binaries ## pause (sandbox) and CoreDNS images, cached in $(CACHE)/images
	@e2e/images/base-images.sh

ifeq ($(CLUSTER),kind)
cluster-up: ## bring up the cluster (CLUSTER=local|kind); kubeconfig in build/kube/kubeconfig
	@e2e/kind/up.sh
cluster-down: ## tear the cluster down, leaving nothing behind
	@e2e/kind/down.sh
images: ## build the sluice images and load them into the cluster
	@e2e/kind/images.sh
else
cluster-up: deps-apt cluster-base-images $(if $(filter 1,$(REDIS_OPERATOR)),redis-operator-binary)
	@$(E2E_CLUSTER)/up.sh full
ifeq ($(REDIS_OPERATOR),1)
	@$(E2E_CLUSTER)/redis-operator.sh up
endif
cluster-down:
	@$(E2E_CLUSTER)/down.sh
images: deps-apt
	@e2e/images/build.sh
endif

redis-operator-binary: ## build the redis-operator manager (pinned in e2e/redis-operator/go.mod, cached in $(CACHE))
	@$(E2E_CLUSTER)/build-tool.sh redis-operator github.com/OT-CONTAINER-KIT/redis-operator redis-operator github.com/OT-CONTAINER-KIT/redis-operator
redis-operator-up: redis-operator-binary ## start redis-operator on the running local cluster (cluster-up does, unless REDIS_OPERATOR=0)
	@$(E2E_CLUSTER)/redis-operator.sh up
redis-operator-down: ## stop it and remove the CRDs it installed
	@$(E2E_CLUSTER)/redis-operator.sh down

controlplane-up: deps-apt controlplane-binaries ## etcd, apiserver, controllers, scheduler, kwok nodes; no kubelet
	@$(E2E_CLUSTER)/up.sh controlplane
controlplane-down: ## tear down the control-plane-only cluster (the same as cluster-down)
	@$(E2E_CLUSTER)/down.sh

cluster-status: ## show the cluster's nodes and system pods
	@$(KUBECTL) --kubeconfig $(KUBECONFIG_PATH) get nodes -L sluice.dev/node-class,sluice.dev/node-type
	@$(KUBECTL) --kubeconfig $(KUBECONFIG_PATH) get pods -A -o wide

e2e-smoke: ## server + redis + DNS client pod + sluice-bench Job on the running cluster
	@e2e/smoke/run.sh
# The smoke test needs only the server, bench and redis images.
ifeq ($(CLUSTER),kind)
e2e-smoke: images
else
e2e-smoke: smoke-images
endif
.PHONY: smoke-images
smoke-images: deps-apt
	@e2e/images/build.sh server bench redis

# The whole path, as CI runs it: the cluster is torn down even when a step
# fails. The suites it runs on the cluster are this part's smoke test and
# the end-to-end suites of the parts that add themselves to E2E_SUITES
# (up.mk: e2e), in that order.
test-e2e: deps-apt ## cluster-up, e2e-smoke, e2e (chart-installed operator, real pods), cluster-down
	@$(call with-teardown,$(MAKE) --no-print-directory cluster-up CLUSTER=$(CLUSTER),$(MAKE) --no-print-directory e2e-smoke $(E2E_SUITES) CLUSTER=$(CLUSTER),$(MAKE) --no-print-directory cluster-down CLUSTER=$(CLUSTER))
