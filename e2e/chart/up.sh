#!/usr/bin/env bash
# `make up`: from a fresh clone to a running, sharded, benchmarked sluice.
# Cluster (kind with Docker, else the repository's local cluster), images,
# helm install, examples/, then the Benchmark's results. Each step prints
# its duration; a missing prerequisite stops the run with what to do.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${MAKE:=make}" "${HELM:?HELM must name the helm binary}"
state=$root/build/up
mkdir -p "$state"
ns=sluice-demo
release=sluice
release_ns=sluice-system

t0=$SECONDS
step_start=$SECONDS
step_n=0
step() {
  if ((step_n)); then printf '    done in %ds\n' $((SECONDS - step_start)); fi
  step_n=$((step_n + 1)); step_start=$SECONDS
  printf '\n==> [%d/8] %s\n' "$step_n" "$*"
}
fail() { printf '\nmake up: FAILED at step %d: %s\n' "$step_n" "$*" >&2; exit 1; }

step "cluster"
if [[ -n ${CLUSTER:-} ]]; then
  cluster=$CLUSTER
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  cluster=kind
else
  cluster=local
fi
echo "$cluster" >"$state/cluster"
echo "    cluster: $cluster ($([[ $cluster == kind ]] && echo 'Docker is available' || echo 'no Docker engine: the repository builds and runs a real single-node Kubernetes'))"
"$MAKE" --no-print-directory cluster-up CLUSTER="$cluster"

kubeconfig=${KUBECONFIG_PATH:?set by make (mk/common.mk)}
if [[ -f $kubeconfig ]]; then export KUBECONFIG=$kubeconfig; fi
kubectl=$root/build/bin/kubectl
[[ -x $kubectl ]] || kubectl=$(command -v kubectl || true)
[[ -n $kubectl ]] || fail "no kubectl: neither build/bin/kubectl (built by make cluster-up) nor one on PATH"
k() { "$kubectl" "$@"; }
k get nodes -o wide >/dev/null || fail "the cluster's apiserver does not answer (KUBECONFIG=${KUBECONFIG:-default})"
k get nodes -L sluice.dev/node-class | sed 's/^/    /'

step "images"
"$MAKE" --no-print-directory images CLUSTER="$cluster"

step "helm install $release (charts/sluice) into $release_ns"
"$HELM" upgrade --install "$release" charts/sluice --namespace "$release_ns" --create-namespace \
  --wait --timeout 5m ${HELM_EXTRA_ARGS:-} \
  || { k -n "$release_ns" get pods -o wide; k -n "$release_ns" logs deploy/"$release" --tail=40 || true; fail "helm install did not become ready"; }
k -n "$release_ns" get deploy,pods -o wide | sed 's/^/    /'

step "apply examples/ (Pool redis with 2 shards, Queue jobs, Benchmark task-distribution)"
k apply -f examples/ | sed 's/^/    /'

# wait_field KIND NAME JSONPATH WANTED TIMEOUT: polls a status field, printing
# each change, until it equals WANTED; Failed ends the wait at once, and so
# does a resource nobody writes a status to (its controller is missing).
wait_field() {
  local kind=$1 name=$2 path=$3 want=$4 timeout=$5 last="" cur status deadline=$((SECONDS + $5)) t0=$SECONDS
  while ((SECONDS < deadline)); do
    cur=$(k -n "$ns" get "$kind" "$name" -o jsonpath="$path" 2>/dev/null || true)
    if [[ $cur != "$last" ]]; then printf '    %s/%s: %s (%ds)\n' "$kind" "$name" "${cur:-<none>}" $((SECONDS - step_start)); last=$cur; fi
    [[ $cur == "$want" ]] && return 0
    [[ $cur == Failed ]] && return 1
    if ((SECONDS - t0 > 120)); then
      status=$(k -n "$ns" get "$kind" "$name" -o jsonpath='{.status}' 2>/dev/null || true)
      if [[ -z $status ]]; then
        echo "    $kind/$name has no status after 120s: the operator does not reconcile ${kind}s (is it running? kubectl -n $release_ns logs deploy/$release)"
        return 1
      fi
    fi
    sleep 2
  done
  echo "    timed out after ${timeout}s"
  return 1
}

step "wait for Pool redis: 2 shards Ready"
wait_field pool redis '{.status.phase}' Ready 300 || {
  k -n "$ns" describe pool redis | tail -30; k -n "$ns" get pods -o wide
  fail "Pool redis is not Ready (conditions above)"; }
k -n "$ns" get pool redis | sed 's/^/    /'

step "wait for Queue jobs: Ready"
wait_field queue jobs '{.status.conditions[?(@.type=="Ready")].status}' True 120 || {
  k -n "$ns" describe queue jobs | tail -20; fail "Queue jobs is not Ready"; }
k -n "$ns" get queue jobs | sed 's/^/    /'

step "run Benchmark task-distribution"
wait_field benchmark task-distribution '{.status.phase}' Succeeded 900 || {
  k -n "$ns" describe benchmark task-distribution | tail -30
  fail "Benchmark task-distribution did not succeed: $(k -n "$ns" get benchmark task-distribution -o jsonpath='{.status.reason}: {.status.message}')"; }

step "results"
k -n "$ns" get benchmark -o wide
k -n "$ns" get benchmark task-distribution -o json >"$state/benchmark.json"
python3 "$root/e2e/chart/results_table.py" "$state/benchmark.json"
# The report is rendered just after the run ends (condition ReportReady).
report_cm=""
for _ in $(seq 60); do
  report_cm=$(k -n "$ns" get benchmark task-distribution -o jsonpath='{.status.reportConfigMap}')
  [[ -n $report_cm ]] && break
  sleep 2
done
[[ -n $report_cm ]] || echo "    no report ConfigMap after 120s: $(k -n "$ns" get benchmark task-distribution \
  -o jsonpath='{.status.conditions[?(@.type=="ReportReady")].message}')"
if [[ -n $report_cm ]]; then
  k -n "$ns" get configmap "$report_cm" -o json >"$state/report-configmap.json"
  python3 "$root/e2e/chart/results_table.py" --extract "$state/report-configmap.json" "$state/report"
  echo
  echo "    HTML report: $state/report/$(cd "$state/report" && ls -- *.html 2>/dev/null | head -1)"
  echo "    (from ConfigMap $ns/$report_cm; extract it yourself with:"
  echo "     kubectl -n $ns get configmap $report_cm -o go-template='{{index .data \"report.html\"}}' > report.html)"
fi
printf '    done in %ds\n\nmake up: finished in %ds. kubectl: KUBECONFIG=%s %s get sluice -A; undo with make down\n' \
  $((SECONDS - step_start)) $((SECONDS - t0)) "${KUBECONFIG:-~/.kube/config}" "$kubectl"
