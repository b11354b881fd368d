#!/usr/bin/env bash
# Dynamic provisioning of node-local volumes on the running cluster (part of
# `make e2e-smoke`; runs alone too): a claim of the default StorageClass waits
# for its pod (WaitForFirstConsumer), then gets a Bound PV pinned to the pod's
# node; on a real node the pod writes to it as a non-root user; deleting the
# claim deletes the PV and, with the local cluster's provisioner, its
# directory. Without a real node (control-plane-only mode) the pod goes to a
# simulated node, which never runs it: everything but the write is checked.
set -Eeuo pipefail # -E: the ERR trap also fires inside k()
source "$(dirname "$0")/env.sh"
NS=sluice-volumes
t0=$SECONDS
step() { printf '==> [%3ds] volumes: %s\n' $((SECONDS - t0)) "$*"; }
fail() { echo "FAIL: $*" >&2; false; }

diagnose() {
  echo "---- volume test failed; state of namespace $NS ----" >&2
  k -n "$NS" get pvc,pods -o wide >&2 || true
  k get pv,storageclass >&2 || true
  k -n "$NS" get events --sort-by=.lastTimestamp >&2 || true
  k -n "$NS" logs writer >&2 || true
}
trap diagnose ERR

class=$(k get storageclass -o go-template='{{range .items}}{{if eq (index .metadata.annotations "storageclass.kubernetes.io/is-default-class") "true"}}{{.metadata.name}} {{.provisioner}}{{"\n"}}{{end}}{{end}}' | head -1)
[[ -n $class ]] || fail "the cluster has no default StorageClass"
read -r class provisioner <<<"$class"
first_node() { k get nodes -l "$1" -o jsonpath='{.items[*].metadata.name}' | awk '{print $1}'; }
node=$(first_node 'sluice.dev/node-type=real,!node-role.kubernetes.io/control-plane')
real=true
if [[ -z $node ]]; then
  real=false
  node=$(first_node type=kwok)
fi
[[ -n $node ]] || fail "no node to place the volume on"
step "default StorageClass $class ($provisioner); pod on $node (real node: $real)"

if k get ns "$NS" >/dev/null 2>&1; then
  k delete ns "$NS" --wait=true --timeout=120s >/dev/null
fi
k create ns "$NS" >/dev/null
manifest=$(sed "s|@NODE@|$node|" "$ROOT/e2e/smoke/volume.yaml")
# The claim alone first: with WaitForFirstConsumer nothing is provisioned
# until a pod that uses it is scheduled.
k apply -f - <<<"$(awk '/^---$/ {exit} {print}' <<<"$manifest")" >/dev/null
sleep 2
phase=$(k -n "$NS" get pvc data -o jsonpath='{.status.phase}')
[[ $phase == Pending ]] || fail "claim without a pod is $phase, want Pending (WaitForFirstConsumer)"
k apply -f - <<<"$manifest" >/dev/null

step "claim Bound after the pod is scheduled"
k -n "$NS" wait pvc/data --for=jsonpath='{.status.phase}'=Bound --timeout=120s >/dev/null
pv=$(k -n "$NS" get pvc data -o jsonpath='{.spec.volumeName}')
get_pv() { k get pv "$pv" -o jsonpath="$1"; }
affinity=$(get_pv '{range .spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*]}{.key}{" "}{.operator}{" "}{.values[*]}{"\n"}{end}')
echo "    PV $pv: capacity $(get_pv '{.spec.capacity.storage}'), class $(get_pv '{.spec.storageClassName}'), affinity: $affinity"
[[ $affinity == "kubernetes.io/hostname In $node" ]] || fail "PV $pv node affinity is '$affinity', want kubernetes.io/hostname In $node"
[[ $(get_pv '{.spec.capacity.storage}') == 64Mi ]] || fail "PV capacity $(get_pv '{.spec.capacity.storage}'), want 64Mi"
[[ $(get_pv '{.spec.storageClassName}') == "$class" ]] || fail "PV class is not $class"
[[ $(get_pv '{.spec.persistentVolumeReclaimPolicy}') == Delete ]] || fail "PV reclaim policy is not Delete"
[[ $(get_pv '{.spec.claimRef.namespace}/{.spec.claimRef.name}') == "$NS/data" ]] || fail "PV is bound to another claim"
k -n "$NS" wait pod/writer --for=jsonpath='{.spec.nodeName}'="$node" --timeout=60s >/dev/null

# The directory is checked where this cluster's own provisioner made it: on this machine.
path=""
if [[ $provisioner == sluice.dev/local ]]; then
  path=$(get_pv '{.spec.local.path}')
  [[ -d $path ]] || fail "PV $pv names $path, which is not a directory on this machine"
fi

if $real; then
  step "pod writes to the volume as uid 999 with fsGroup 999"
  k -n "$NS" wait pod/writer --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null ||
    fail "writer pod did not succeed"
  out=$(k -n "$NS" logs writer)
  sed 's/^/    /' <<<"$out"
  grep -q '^probe from uid 999$' <<<"$out" || fail "the pod did not write and read back its probe"
  if [[ -n $path ]]; then
    [[ $(stat -c %u "$path/probe") == 999 ]] || fail "$path/probe is not owned by uid 999"
  fi
fi

step "deleting the claim deletes PV $pv${path:+ and $path}"
k -n "$NS" delete pod writer --wait=true --timeout=120s >/dev/null
k -n "$NS" delete pvc data --wait=true --timeout=60s >/dev/null
k wait pv/"$pv" --for=delete --timeout=120s >/dev/null
if [[ -n $path ]]; then
  for _ in $(seq 50); do [[ -e $path ]] || break; sleep 0.2; done
  [[ ! -e $path ]] || fail "$path is still there after its PV was deleted"
fi

trap - ERR
k delete ns "$NS" --wait=false >/dev/null
step "passed"
