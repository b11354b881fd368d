# Teardown of the local cluster (sourced by down.sh, and by up.sh to recover
# from a crashed or half-finished cluster). Removes only what the cluster
# made: its recorded processes, its containerd's pods, mounts under its own
# directories, its interfaces, its tagged iptables rules and kube-proxy's
# chains, and restores the sysctls it changed.

teardown() {
  local name
  # Third-party controllers first: nothing may act on the cluster while it goes.
  stop redis-operator
  stop kube-router
  kube_router_cleanup
  stop kubelet
  # After a crash containerd may be gone while its pods live on: start it
  # again on its own state so it can remove them properly.
  if ! running containerd && [[ -d $DATA_DIR/containerd && -f $CONF/containerd.toml ]]; then
    start containerd "$(command -v containerd)" --config "$CONF/containerd.toml"
    wait_for containerd 20 ctr --address "$CONTAINERD_SOCK" version || true
  fi
  if running containerd; then
    # Through the CRI, so containerd also runs CNI DEL and removes netns.
    "$BIN/cri-reset" --endpoint "$CRI_ENDPOINT" --timeout 60s || true
  fi
  stop kube-proxy
  if [[ -x $BIN/kube-proxy && -f $CONF/kube-proxy.yaml ]] && iptables-save 2>/dev/null | grep -q KUBE-SERVICES; then
    "$BIN/kube-proxy" --cleanup --config "$CONF/kube-proxy.yaml" >>"$LOGS/kube-proxy.log" 2>&1 || true
  fi
  for name in local-provisioner kwok kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    stop "$name"
  done
  kill_leftover_shims
  unmount_under "$DATA_DIR" "$RUN_DIR"
  remove_cgroups
  ip link del "$CNI_DEV" 2>/dev/null || true
  ip link del "$NODE_DEV" 2>/dev/null || true
  remove_iptables
  restore_sysctls
  # The provisioned volumes go with the cluster (they are under DATA_DIR;
  # named here so that stays true if either moves).
  rm -rf "$VOLUMES_DIR" "$DATA_DIR" "$RUN_DIR/containerd" "$RUN_DIR/runc" "$RUN_DIR/cni" "$RUN_DIR/etcd" \
         "$RUN_DIR/pids" "$RUN_DIR/mode" "$RUN_DIR/sysctl"
}

# Container shims outlive containerd; ours name our socket on their command line.
kill_leftover_shims() {
  local pid cmd
  for pid in $(pgrep -f containerd-shim-runc-v2 || true); do
    cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || continue
    [[ $cmd == *"$CONTAINERD_SOCK"* ]] || continue
    # Kill the whole process group of each container it supervises too.
    local child
    for child in $(pgrep -P "$pid" || true); do kill -KILL "$child" 2>/dev/null || true; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Containers whose shim is gone: runc's state under our root says which.
  if [[ -d $RUN_DIR/runc ]]; then
    local ns id
    for ns in "$RUN_DIR"/runc/*/; do
      [[ -d $ns ]] || continue
      for id in $(runc --root "$ns" list -q 2>/dev/null); do
        runc --root "$ns" kill "$id" KILL 2>/dev/null || true
        runc --root "$ns" delete --force "$id" 2>/dev/null || true
      done
    done
  fi
}

# unmount_under DIR... : every mount point below the given directories,
# deepest first (overlay rootfs, secret/configmap tmpfs, etcd's tmpfs).
unmount_under() {
  local dir mp
  for dir in "$@"; do
    [[ -d $dir ]] || continue
    dir=$(readlink -f "$dir")
    while read -r mp; do
      umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
    done < <(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
  done
}

# kubelet's QoS cgroups (cgroup v1: one tree per controller).
remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d $d ]] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# Our tagged rules, plus the chains kube-proxy and kubelet create (KUBE-*),
# which --cleanup may leave when kube-proxy died first.
remove_iptables() {
  local ipt table rule chain
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle; do
      "$ipt-save" -t "$table" 2>/dev/null | { grep -- "--comment $IPT_TAG" || true; } | sed 's/^-A /-D /' |
        while read -r rule; do eval "$ipt -w -t $table $rule" 2>/dev/null || true; done
      "$ipt-save" -t "$table" 2>/dev/null | { grep -E '^-A [A-Z]+ .*-j KUBE-' || true; } | sed 's/^-A /-D /' |
        while read -r rule; do eval "$ipt -w -t $table $rule" 2>/dev/null || true; done
      for chain in $("$ipt-save" -t "$table" 2>/dev/null | awk '/^:KUBE-/ {print substr($1, 2)}'); do
        "$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$ipt-save" -t "$table" 2>/dev/null | awk '/^:KUBE-/ {print substr($1, 2)}'); do
        "$ipt" -w -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

restore_sysctls() {
  local f
  [[ -d $RUN_DIR/sysctl ]] || return 0
  for f in "$RUN_DIR"/sysctl/*; do
    [[ -f $f ]] || continue
    sysctl -qw "$(basename "$f")=$(<"$f")" 2>/dev/null || true
  done
}

# kube_router_cleanup : removes the NetworkPolicy engine's chains and ipsets
# (e2e/cluster/kube-router.sh), by its own --cleanup-config, then whatever of
# its naming is still there (its binary may be gone): chains first, since an
# ipset in use by a rule cannot be destroyed.
kube_router_cleanup() {
  local rule chain set
  if [[ -x $BIN/kube-router ]] && iptables-save -t filter 2>/dev/null | grep -q '^:KUBE-ROUTER-'; then
    "$BIN/kube-router" --cleanup-config >>"$LOGS/kube-router.log" 2>&1 || true
  fi
  iptables-save -t filter 2>/dev/null | { grep -E '^-A (INPUT|FORWARD|OUTPUT) .*-j KUBE-ROUTER-' || true; } |
    sed 's/^-A /-D /' | while read -r rule; do eval "iptables -w -t filter $rule" 2>/dev/null || true; done
  for chain in $(iptables-save -t filter 2>/dev/null | awk '/^:KUBE-(ROUTER-|POD-FW-|NWPLCY-)/ {print substr($1, 2)}'); do
    iptables -w -t filter -F "$chain" 2>/dev/null || true
  done
  for chain in $(iptables-save -t filter 2>/dev/null | awk '/^:KUBE-(ROUTER-|POD-FW-|NWPLCY-)/ {print substr($1, 2)}'); do
    iptables -w -t filter -X "$chain" 2>/dev/null || true
  done
  command -v ipset >/dev/null || return 0
  for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-SRC-|KUBE-DST-|TMP-[A-Z2-7]{16}$)' || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
}

# Anything left that teardown must remove: used by up.sh to decide on recovery.
leftovers() {
  [[ -d $PIDS && -n $(ls -A "$PIDS" 2>/dev/null) ]] && return 0
  ip link show "$NODE_DEV" >/dev/null 2>&1 && return 0
  ip link show "$CNI_DEV" >/dev/null 2>&1 && return 0
  [[ -d $DATA_DIR ]] && return 0
  return 1
}
