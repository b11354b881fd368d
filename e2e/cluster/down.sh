#!/usr/bin/env bash
# Tears down the local cluster (either mode) and everything it left behind.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/teardown.sh"
[[ $(id -u) == 0 ]] || die "the local cluster needs root"
lock
if [[ $(cluster_mode) == none ]] && ! leftovers; then
  log "no local cluster running"
  exit 0
fi
log "tearing down the local cluster ($(cluster_mode) mode)"
teardown
log "cluster removed"
