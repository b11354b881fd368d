#!/usr/bin/env bash
# Brings up the local cluster: `up.sh full` (a real node: containerd, kubelet,
# kube-proxy, CoreDNS, plus simulated nodes) or `up.sh controlplane` (etcd,
# apiserver, controller-manager, scheduler, kwok; no kubelet). A running
# control plane is extended to a full cluster in place; a crashed or
# half-started cluster is torn down first.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/controlplane.sh"
source "$ROOT/e2e/cluster/node.sh"
source "$ROOT/e2e/cluster/storage.sh"
source "$ROOT/e2e/cluster/teardown.sh"

want=${1:-full}
[[ $want == full || $want == controlplane ]] || die "usage: up.sh full|controlplane"
[[ $(id -u) == 0 ]] || die "the local cluster needs root (network, mounts, containerd)"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
  [[ -x $BIN/$b ]] || die "$BIN/$b missing: run 'make cluster-binaries'"
done
if [[ $want == full ]]; then
  for b in kubelet kube-proxy cri-reset; do [[ -x $BIN/$b ]] || die "$BIN/$b missing"; done
fi
build_provisioner || die "building $PROVISIONER_SRC failed"
lock

healthy() {
  local d
  for d in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do running "$d" || return 1; done
  if [[ $1 == full ]]; then
    for d in containerd kubelet kube-proxy; do running "$d" || return 1; done
  fi
  apiserver_ready
}

usage() {
  cat <<EOF2
Cluster ($(cluster_mode)) is up. Use it with:
  export KUBECONFIG=$KUBECONFIG_PATH
  $KUBECTL get nodes -L sluice.dev/node-class,sluice.dev/node-type
Simulated nodes carry type=kwok and sluice.dev/node-type=simulated.
Logs: $LOGS
EOF2
  if [[ $(cluster_mode) == full ]]; then
    echo "Real node: $NODE_NAME (sluice.dev/node-type=real, sluice.dev/node-class=metal)."
  else
    echo "No real node (control plane only): pods bound to simulated nodes never run."
  fi
}

current=$(cluster_mode)
if [[ $current != none ]] && healthy "$current"; then
  # A cluster started before the volume provisioner existed gets it now
  # (its certificate too); nothing that runs is restarted.
  [[ -f $PKI/local-provisioner.kubeconfig ]] || "$ROOT/e2e/cluster/pki.sh"
  storage_up
  if [[ $current == full || $want == controlplane ]]; then
    log "cluster already running ($current mode)"
    usage
    exit 0
  fi
  log "extending the running control plane with the real node"
  node_up
  echo full > "$RUN_DIR/mode"
  log "cluster ready"
  usage
  exit 0
fi
if [[ $current != none ]] || leftovers; then
  log "cleaning up a previous cluster that is no longer healthy"
  teardown
fi

mkdir -p "$RUN_DIR" "$LOGS"
"$ROOT/e2e/cluster/pki.sh"
trap 'echo "bring-up failed: see logs in $LOGS; run make cluster-down to clean up" >&2' ERR
echo "$want" > "$RUN_DIR/mode"
controlplane_up "$want"
log "local-provisioner, default StorageClass local (volumes in $VOLUMES_DIR)"
storage_up
if [[ $want == full ]]; then
  node_up
fi
log "cluster ready"
usage
