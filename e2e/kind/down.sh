#!/usr/bin/env bash
# `make cluster-down CLUSTER=kind`.
source "$(dirname "$0")/lib.sh"
"$(kind_bin)" delete cluster --name "$CLUSTER_NAME"
rm -f "$KUBECONFIG_PATH"
