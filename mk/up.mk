# The main job: `make up` goes from a fresh clone to a running, sharded,
# benchmarked sluice (cluster, images, helm install, examples/, results);
# `make down` undoes it. The steps live in e2e/chart/{up,down}.sh and call
# the cluster and image targets of mk/cluster.mk.
include $(ROOT)/mk/common.mk

# CLUSTER=kind|local on the command line picks the cluster; by default kind
# when `docker info` works, else the local cluster.
UP_CLUSTER := $(if $(filter command line environment,$(origin CLUSTER)),$(CLUSTER))

.PHONY: up down
up: helm ## cluster (kind with Docker, else local), images, helm install, examples/, Benchmark results
	@HELM=$(HELM) CLUSTER=$(UP_CLUSTER) e2e/chart/up.sh

down: helm ## undo make up: examples, the helm release, the cluster
	@HELM=$(HELM) e2e/chart/down.sh

# Needs the full local cluster (make cluster-up); see e2e/chart/e2e.sh.
# test-e2e (mk/cluster.mk) runs it on the cluster it brings up.
E2E_SUITES += e2e
.PHONY: e2e
e2e: helm venv-operator venv-compat ## operator and Benchmark end to end with real pods, against the chart-installed operator
	@HELM=$(HELM) e2e/chart/e2e.sh

.PHONY: e2e-redis-operator
e2e-redis-operator: helm venv-operator venv-compat ## Pools by the real redis-operator with real pods (cluster-up with REDIS_OPERATOR=1)
	@HELM=$(HELM) SLUICE_E2E_PYTEST_ARGS="-k test_redis_operator" e2e/chart/e2e.sh

BENCH_TARGETS += bench-pool-ready
.PHONY: bench-pool-ready
bench-pool-ready: venv-operator ## Pool of SHARDS (3) builtin shards and a Queue, apply -> Ready with real pods (after make up)
	cd operator && KUBECONFIG=$(KUBECONFIG_PATH) $(OPERATOR_PY) bench/pool_ready_bench.py
