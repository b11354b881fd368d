#!/usr/bin/env bash
# `make e2e`: the operator and Benchmark end-to-end suites (operator/tests/e2e)
# with real pods, against the operator as the chart installs it, on the
# running full cluster. A release that `make up` installed is reused and kept;
# one this script installs is uninstalled at the end, and the uninstall must
# leave nothing behind but the CRDs and the data volumes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${MAKE:=make}" "${HELM:?HELM must name the helm binary}"
release=sluice
release_ns=sluice-system
export KUBECONFIG=${KUBECONFIG_PATH:?set by make (mk/common.mk)}
k() { "$root/build/bin/kubectl" --request-timeout=30s "$@"; }
t0=$SECONDS
say() { printf '==> [%4ds] %s\n' $((SECONDS - t0)) "$*"; }

k get nodes -l sluice.dev/node-type=real -o name | grep -q . \
  || { echo "make e2e: needs the full local cluster with its real node (make cluster-up)" >&2; exit 1; }

say "images"
"$MAKE" --no-print-directory images
# The client pods of the tenancy tests run the unchanged python-zaqarclient.
e2e/images/build.sh zaqar_client

installed=0
if "$HELM" status "$release" -n "$release_ns" >/dev/null 2>&1; then
  say "reusing the installed release $release_ns/$release (upgraded to the working tree)"
else
  installed=1
  say "helm install $release (charts/sluice) into $release_ns"
fi
"$HELM" upgrade --install "$release" charts/sluice -n "$release_ns" --create-namespace --wait --timeout 5m >/dev/null
if ((!installed)); then
  # A rebuilt image under the same tag only reaches a running pod by a restart.
  k -n "$release_ns" rollout restart deployment/"$release" >/dev/null
  k -n "$release_ns" rollout status deployment/"$release" --timeout=180s
fi

say "operator/tests/e2e"
rc=0
(cd operator && "$root/build/venv-operator/bin/python" -m pytest -q -s -p no:cacheprovider --durations=12 tests/e2e \
  ${SLUICE_E2E_PYTEST_ARGS:-}) || rc=$?

if ((installed)); then
  say "helm uninstall $release: nothing may stay but the CRDs and the data volumes"
  "$HELM" uninstall "$release" -n "$release_ns" --wait --timeout 3m
  sel=app.kubernetes.io/instance=$release
  # helm waits for the objects it deleted, not for their pods' graceful exit.
  k -n "$release_ns" wait --for=delete pod -l "$sel" --timeout=120s >/dev/null 2>&1 || true
  left=$(k get all,serviceaccounts,configmaps,secrets,roles,rolebindings -n "$release_ns" -l "$sel" -o name)
  if k get crd servicemonitors.monitoring.coreos.com >/dev/null 2>&1; then
    left+=$(k get servicemonitors,prometheusrules -n "$release_ns" -l "$sel" -o name)
  fi
  left+=$(k get clusterroles,clusterrolebindings -l "$sel" -o name)
  crds=$(k get crd pools.sluice.dev queues.sluice.dev benchmarks.sluice.dev -o name | wc -l)
  if [[ -n $left ]]; then echo "left behind by helm uninstall:"$'\n'"$left" >&2; rc=1; fi
  if ((crds != 3)); then echo "helm uninstall removed the CRDs (helm.sh/resource-policy: keep)" >&2; rc=1; fi
  k delete namespace "$release_ns" --wait --timeout=120s >/dev/null
  ((rc)) || echo "    uninstall left only the CRDs (and the data volumes the tests' namespaces already released)"
fi
say "done (rc=$rc)"
exit $rc
