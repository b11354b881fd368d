#!/usr/bin/env bash
# The cluster's NetworkPolicy engine: kube-router's firewall (its
# NetworkPolicyController, v1.6.1 pinned in e2e/kube-router/go.mod) as a host
# process of the full local cluster, like the other components.
# `kube-router.sh up` starts it with the cluster's kubeconfig for the real
# node and waits until its policy controller runs (its first full sync has
# begun; the e2e waits absorb the rest); `kube-router.sh down` stops
# it and removes exactly what it added (its KUBE-ROUTER-*, KUBE-POD-FW-*,
# KUBE-NWPLCY-* chains and its KUBE-SRC-*/KUBE-DST-* ipsets), by its own
# --cleanup-config plus a check that nothing of it is left. Cluster teardown
# does the same (teardown.sh).
#
# Why it works here: pods sit on the CNI bridge ($CNI_DEV) and bridged
# traffic passes iptables (br_netfilter, bridge-nf-call-iptables=1, set by
# node.sh); the kernel has ipset (hash:ip, hash:net) and the xt_set/physdev
# matches that kube-router's rules use, under iptables-nft like kube-proxy.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/controlplane.sh"
source "$ROOT/e2e/cluster/teardown.sh"

NAME=kube-router
HEALTHZ_ADDR=127.0.0.1:$((10295 + PORT_BASE))

preflight() {
  command -v ipset >/dev/null || die "ipset missing (apt-get install ipset; make deps-apt installs it)"
  [[ $(sysctl -n net.bridge.bridge-nf-call-iptables 2>/dev/null) == 1 ]] ||
    die "net.bridge.bridge-nf-call-iptables is not 1: bridged pod traffic would bypass the policies"
  # A set the kernel refuses to create means no policy can be enforced.
  local probe=sluice-ipset-probe
  ipset create "$probe" hash:net -exist || die "the kernel has no ipset hash:net"
  ipset destroy "$probe"
}

up() {
  [[ -x $BIN/$NAME ]] || die "$BIN/$NAME missing: run 'make kube-router-binary'"
  [[ $(cluster_mode) == full ]] || die "kube-router needs the full local cluster (its real node)"
  apiserver_ready || die "no cluster at $KUBECONFIG_PATH"
  preflight
  if running "$NAME"; then
    log "$NAME already running"
    return 0
  fi
  log "$NAME firewall (NetworkPolicies; healthz $HEALTHZ_ADDR)"
  start "$NAME" "$BIN/$NAME" --kubeconfig "$KUBECONFIG_PATH" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false \
    --service-cluster-ip-range "$SERVICE_CIDR" --healthz-address "$HEALTHZ_ADDR"
  wait_for "$NAME first policy sync" 90 curl -sf "http://$HEALTHZ_ADDR/healthz" ||
    die "$NAME did not sync: see $LOGS/$NAME.log"
}

down() {
  stop "$NAME"
  kube_router_cleanup
}

[[ $(id -u) == 0 ]] || die "the local cluster needs root"
lock
case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: kube-router.sh up|down" ;;
esac
