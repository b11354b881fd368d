#!/usr/bin/env bash
# `make cluster-up CLUSTER=kind`: the kind counterpart of the local cluster.
source "$(dirname "$0")/lib.sh"
kind=$(kind_bin)
kubectl=$(kubectl_bin)
mkdir -p "$(dirname "$KUBECONFIG_PATH")"
if "$kind" get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  echo "==> kind cluster $CLUSTER_NAME already exists"
  "$kind" export kubeconfig --name "$CLUSTER_NAME" --kubeconfig "$KUBECONFIG_PATH"
else
  "$kind" create cluster --config "$ROOT/e2e/kind/cluster.yaml" --kubeconfig "$KUBECONFIG_PATH" --wait 180s
fi
"$kubectl" --kubeconfig "$KUBECONFIG_PATH" wait --for=condition=Ready nodes --all --timeout=180s
cat <<EOF2
kind cluster $CLUSTER_NAME is up. Use it with:
  export KUBECONFIG=$KUBECONFIG_PATH
  $kubectl get nodes -L sluice.dev/node-class,sluice.dev/node-type
EOF2
