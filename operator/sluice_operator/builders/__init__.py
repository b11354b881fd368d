"""Manifest builders: pure functions from (spec, config) to Kubernetes object dicts."""
