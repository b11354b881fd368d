#!/usr/bin/env bash
# `make e2e-smoke`: on the running cluster (local or kind), deploys Redis and
# sluice-server behind Services, runs a pod that resolves and calls the server
# by its DNS name, and a sluice-bench Job whose result is read back from its
# pod's termination message; then checks dynamic provisioning of node-local
# volumes (volumes.sh). Fails with diagnostics on any error.
set -Eeuo pipefail # -E: the ERR trap also fires inside functions
source "$(dirname "$0")/env.sh"
NS=sluice-smoke
HERE=$ROOT/e2e/smoke
t0=$SECONDS
step() { printf '==> [%3ds] %s\n' $((SECONDS - t0)) "$*"; }

diagnose() {
  echo "---- smoke test failed; state of namespace $NS ----" >&2
  k -n "$NS" get all,events -o wide >&2 || true
  for p in $(k -n "$NS" get pods -o name 2>/dev/null); do
    echo "---- logs $p ----" >&2
    k -n "$NS" logs "$p" --all-containers --tail 50 >&2 || true
  done
}
trap diagnose ERR

k get --raw /readyz >/dev/null || { echo "no cluster reachable with KUBECONFIG=$KUBECONFIG (make cluster-up)" >&2; exit 1; }
if k get ns "$NS" >/dev/null 2>&1; then
  step "removing the previous run's namespace"
  k delete ns "$NS" --wait=true --timeout=120s >/dev/null
fi

step "Redis and sluice-server Deployments behind Services"
k apply -f "$HERE/smoke.yaml" >/dev/null
k -n "$NS" rollout status deploy/redis --timeout=120s >/dev/null
k -n "$NS" rollout status deploy/sluice-server --timeout=120s >/dev/null

step "client pod: resolve sluice-server by DNS name and round-trip a message"
svc_ip=$(k -n "$NS" get svc sluice-server -o jsonpath='{.spec.clusterIP}')
sed "s|@SERVICE_IP@|$svc_ip|" "$HERE/client.yaml" | k apply -f - >/dev/null
k -n "$NS" wait pod/dns-client --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null ||
  { k -n "$NS" logs dns-client >&2 || true; false; }
k -n "$NS" logs dns-client | sed 's/^/    /'

step "sluice-bench Job against http://sluice-server:8888"
k apply -f "$HERE/bench-job.yaml" >/dev/null
k -n "$NS" wait job/sluice-bench --for=condition=Complete --timeout=180s >/dev/null
pod=$(k -n "$NS" get pods -l job-name=sluice-bench -o jsonpath='{.items[0].metadata.name}')
msg=$(k -n "$NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')
[[ -n $msg ]] || { echo "the bench pod left no termination message" >&2; false; }

step "result from the termination message of $pod"
python3 - "$msg" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
ops = r["ops"]
bad = {name: op.get("err") for name, op in ops.items() if op.get("err")}
total_ok = sum(op["ok"] for op in ops.values())
for name, op in sorted(ops.items()):
    print(f"    {name:<16} ok={op['ok']:<7} rps={op['rps']:<10} p50={op['p50']}ms p99={op['p99']}ms")
d = r.get("d")
if d:
    print(f"    delivery: produced={d['produced']} unique consumed={d['unique']} lost={d['lost']} dup={d['dup']}")
assert total_ok > 0, "no successful request"
assert not bad, f"request errors: {bad}"
if d:
    assert d["produced"] > 0, "nothing produced"
    assert d["lost"] == 0, f"{d['lost']} messages lost"
PY

step "node-local volumes: a claim of the default StorageClass, written by a non-root pod"
trap - ERR # volumes.sh prints its own diagnostics
"$HERE/volumes.sh"

step "cleaning up"
k delete ns "$NS" --wait=false >/dev/null
step "smoke test passed"
