module sluice.dev/operator/tests/upstream

go 1.24

require (
	github.com/OT-CONTAINER-KIT/redis-operator v0.16.0
	github.com/mongodb/mongodb-kubernetes-operator v0.9.0
	github.com/prometheus-operator/prometheus-operator v0.85.0
)
