#!/usr/bin/env bash
# `make down`: undo `make up`. The examples go first, so the operator still
# runs to release its finalizers; then the release; then the cluster that
# `make up` created (recorded in build/up/cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${MAKE:=make}" "${HELM:?HELM must name the helm binary}"
state=$root/build/up
cluster=$(cat "$state/cluster" 2>/dev/null || echo local)
kubeconfig=${KUBECONFIG_PATH:?set by make (mk/common.mk)}
[[ -f $kubeconfig ]] && export KUBECONFIG=$kubeconfig
kubectl=$root/build/bin/kubectl
[[ -x $kubectl ]] || kubectl=$(command -v kubectl || true)
t0=$SECONDS
if [[ -n $kubectl ]] && "$kubectl" version --request-timeout=5s >/dev/null 2>&1; then
  echo "==> deleting examples/"
  "$kubectl" delete -f examples/ --ignore-not-found --wait --timeout=120s || echo "    (some examples did not go away in time; the cluster goes next anyway)"
  echo "==> helm uninstall sluice"
  "$HELM" uninstall sluice --namespace sluice-system --wait --timeout 2m || true
else
  echo "==> no reachable cluster: skipping the uninstall"
fi
if "$MAKE" -n cluster-down >/dev/null 2>&1; then
  echo "==> make cluster-down CLUSTER=$cluster"
  "$MAKE" --no-print-directory cluster-down CLUSTER="$cluster"
fi
rm -rf "$state"
echo "make down: finished in $((SECONDS - t0))s"
