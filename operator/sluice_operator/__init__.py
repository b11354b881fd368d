"""sluice-operator: reconciles sluice.dev Pools, Queues and Benchmarks."""

GROUP = "sluice.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
