#!/usr/bin/env bash
# The real redis-operator (OT-CONTAINER-KIT, the release pinned in
# e2e/redis-operator/go.mod) as a host process of the local cluster, like the
# other components: `redis-operator.sh up` installs its CRDs (the module's own
# config/crd/bases) and starts the manager built by build-tool.sh with the
# cluster's kubeconfig, webhooks off, metrics and health on loopback ports
# that clash with no other component; `redis-operator.sh down` stops it and
# deletes what `up` installed (CRDs labelled below), nothing else. Cluster
# teardown stops it too (teardown.sh). Its images (quay.io/opstree/redis and
# redis-sentinel, built from Debian by e2e/images/build.sh ot_redis) are
# imported with the others.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/controlplane.sh"

NAME=redis-operator
MODULE=github.com/OT-CONTAINER-KIT/redis-operator
LABEL=sluice.dev/installed-by=redis-operator-host
METRICS_ADDR=127.0.0.1:$((10290 + PORT_BASE))
HEALTH_ADDR=127.0.0.1:$((10291 + PORT_BASE))

crd_dir() {
  local mod
  mod=$(cd "$ROOT/e2e/redis-operator" && "${GO:-go}" list -m -f '{{.Dir}}' "$MODULE") || return 1
  echo "$mod/config/crd/bases"
}

up() {
  [[ -x $BIN/$NAME ]] || die "$BIN/$NAME missing: run 'make redis-operator-binary'"
  apiserver_ready || die "no cluster at $KUBECONFIG_PATH"
  local dir f
  dir=$(crd_dir)
  [[ -d $dir ]] || die "no CRDs in the $MODULE module ($dir)"
  for f in "$dir"/*.yaml; do
    # CRDs a real redis-operator installation already put there are left as they are.
    if ! kc get -f "$f" >/dev/null 2>&1; then
      # Server-side: the schemas are too large for the last-applied annotation.
      kc apply --server-side --field-manager=sluice-cluster -f "$f" >/dev/null
      kc label -f "$f" "$LABEL" --overwrite >/dev/null
    fi
  done
  kc wait --for=condition=Established -f "$dir" --timeout=60s >/dev/null
  if running "$NAME"; then
    log "$NAME already running"
    return 0
  fi
  log "$NAME $(basename "$(dirname "$(readlink -f "$BIN/$NAME")")") (metrics $METRICS_ADDR, health $HEALTH_ADDR)"
  KUBECONFIG=$KUBECONFIG_PATH ENABLE_WEBHOOKS=false start "$NAME" "$BIN/$NAME" \
    --enable-webhooks=false --leader-elect=false \
    --metrics-bind-address "$METRICS_ADDR" --health-probe-bind-address "$HEALTH_ADDR"
  wait_for "$NAME healthz" 60 curl -sf "http://$HEALTH_ADDR/healthz" ||
    die "$NAME did not become healthy: see $LOGS/$NAME.log"
}

down() {
  # The CRDs first, while the manager still runs: deleting them deletes the
  # remaining CRs, whose finalizers only the manager removes.
  if apiserver_ready; then
    kc delete crd -l "$LABEL" --ignore-not-found --timeout=120s >/dev/null || true
  fi
  stop "$NAME"
}

[[ $(id -u) == 0 ]] || die "the local cluster needs root"
lock
case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: redis-operator.sh up|down" ;;
esac
