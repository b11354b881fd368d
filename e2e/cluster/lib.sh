# Shared settings and helpers for the local cluster scripts (sourced, not run).
#
# One local cluster per machine: its runtime state lives in /run/sluice and
# /var/lib/sluice (fixed paths, so a crashed bring-up from any clone is found
# and cleaned by the next one); its kubeconfig, certificates and logs live in
# the clone's build/ directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
BIN=$BUILD/bin
CACHE=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}

# SLUICE_INSTANCE=N (default 0) runs a second, independent cluster beside the
# default one: its own directories, addresses, ranges and ports (only one of
# them may be a full cluster at a time: kube-proxy's chains are global).
INSTANCE=${SLUICE_INSTANCE:-0}
sfx=""
((INSTANCE == 0)) || sfx="-$INSTANCE"
KUBE_DIR=$BUILD/kube$sfx
PKI=$KUBE_DIR/pki
KUBECONFIG_PATH=$KUBE_DIR/kubeconfig
LOGS=$BUILD/cluster$sfx/logs
CONF=$BUILD/cluster$sfx/config

RUN_DIR=/run/sluice$sfx        # pid files, sockets, CNI config, etcd tmpfs
DATA_DIR=/var/lib/sluice$sfx   # containerd and kubelet roots
VOLUMES_DIR=$DATA_DIR/volumes  # one directory per provisioned volume (storage.sh)
PIDS=$RUN_DIR/pids
CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock
CRI_ENDPOINT=unix://$CONTAINERD_SOCK

# Addresses. The node address sits on a port-less bridge (sluice0) that also
# holds the routes for the whole pod and service ranges, so a packet for any
# cluster address is delivered locally and never follows the default route.
NODE_NAME=sluice-node-$INSTANCE
NODE_IP=10.243.255.$((1 + INSTANCE))
NODE_DEV=sluice$INSTANCE
CNI_DEV=sluicecni$INSTANCE
POD_NET=10.$((244 + 2 * INSTANCE))     # pods: $POD_NET.0.0/16, one /24 per node
POD_CIDR=$POD_NET.0.0/16
NODE_POD_CIDR=$POD_NET.0.0/24
SERVICE_NET=10.$((96 + INSTANCE))
SERVICE_CIDR=$SERVICE_NET.0.0/16
KUBE_SERVICE_IP=$SERVICE_NET.0.1
DNS_SERVICE_IP=$SERVICE_NET.0.10
CLUSTER_DOMAIN=cluster.local
APISERVER_PORT=$((16443 + INSTANCE))
ETCD_CLIENT=127.0.0.1:$((12379 + 10 * INSTANCE))
ETCD_PEER=127.0.0.1:$((12380 + 10 * INSTANCE))
PORT_BASE=$((100 * INSTANCE))  # added to the components' usual local ports
IPT_TAG=sluice-cluster$sfx     # comment on every iptables rule we add
KWOK_SIM_METAL=${SLUICE_SIM_METAL:-2}
KWOK_SIM_VIRTUAL=${SLUICE_SIM_VIRTUAL:-3}

KUBECTL=$BIN/kubectl
export PATH=$BIN:/usr/sbin:/sbin:$PATH

log() { printf '==> [%6ss] %s\n' "$(elapsed)" "$*"; }
die() { echo "ERROR: $*" >&2; exit 1; }
_t0=${EPOCHREALTIME/./}
elapsed() { local d=$(( ${EPOCHREALTIME/./} - _t0 )); echo "$((d / 1000000)).$(( d / 100000 % 10 ))"; }

kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# start NAME CMD... : runs a daemon in its own session, logs to $LOGS/NAME.log,
# and records its pid with its start time (pid + start time name one process
# for good, even after the pid is reused or the binary is replaced).
start() {
  local name=$1 pid; shift
  mkdir -p "$PIDS" "$LOGS"
  # fd 9 is the bring-up lock: daemons must not inherit it.
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null 9>&- &
  pid=$!
  echo "$pid" > "$PIDS/$name.pid"
  starttime "$pid" > "$PIDS/$name.start"
}

# starttime PID : field 22 of /proc/PID/stat (clock ticks since boot).
starttime() { awk '{sub(/^.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }

# running NAME : true when the recorded daemon is alive (not a zombie).
running() {
  local name=$1 pid
  [[ -f $PIDS/$name.pid ]] || return 1
  pid=$(<"$PIDS/$name.pid")
  if [[ -f $PIDS/$name.exe && ! -f $PIDS/$name.start ]]; then
    # Recorded by an earlier version of these scripts: pid and binary.
    [[ $(readlink -f "/proc/$pid/exe" 2>/dev/null) == "$(<"$PIDS/$name.exe")" ]] || return 1
  else
    [[ -n $pid && $(starttime "$pid") == "$(cat "$PIDS/$name.start" 2>/dev/null)" ]] || return 1
  fi
  [[ $(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null) != Z ]]
}

# stop NAME : SIGTERM, then SIGKILL after a grace period; only our own pid.
stop() {
  local name=$1 pid i
  if running "$name"; then
    pid=$(<"$PIDS/$name.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do running "$name" || break; sleep 0.1; done
    if running "$name"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  fi
  rm -f "$PIDS/$name.pid" "$PIDS/$name.start" "$PIDS/$name.exe"
}

# wait_for DESC SECONDS CMD... : polls CMD every 0.2s.
wait_for() {
  local desc=$1 timeout=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) >= deadline )); then
      echo "ERROR: timed out after ${timeout}s waiting for $desc" >&2
      return 1
    fi
    sleep 0.2
  done
}

# Serialise bring-up and teardown across clones and shells.
lock() {
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/.lock"
  flock -w 600 9 || die "another cluster bring-up or teardown holds $RUN_DIR/.lock"
}

# The mode the running cluster was started in: none, controlplane or full.
cluster_mode() { cat "$RUN_DIR/mode" 2>/dev/null || echo none; }
