# Dynamic provisioning of node-local volumes (sourced by up.sh): the default
# StorageClass `local` and the host process that serves it,
# e2e/k8s/cmd/local-provisioner. Every volume is a directory under
# $VOLUMES_DIR (lib.sh), in the instance's own DATA_DIR, whichever node (real
# or simulated) it is pinned to: all of them live on this machine. teardown.sh
# stops the process and removes the directories.

PROVISIONER_SRC=$ROOT/e2e/k8s/cmd/local-provisioner

# Built at every bring-up, in both modes: the control-plane-only path builds
# no other tools of this repository. Go skips an up-to-date output (under a
# second), and the result is renamed into build/bin only when it changed,
# since another instance may be running the binary there.
build_provisioner() {
  local out=$BUILD/local-provisioner/local-provisioner tmp
  mkdir -p "$BIN" "${out%/*}"
  (cd "$PROVISIONER_SRC" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false "${GO:-go}" build -trimpath \
    -ldflags "-s -w" -o "$out" .) || return 1
  cmp -s "$out" "$BIN/local-provisioner" && return 0
  tmp=$(mktemp "$BIN/.local-provisioner.XXXXXX")
  cp "$out" "$tmp" && chmod 0755 "$tmp" && mv -f "$tmp" "$BIN/local-provisioner"
}

# storage_up : RBAC and StorageClass, then the provisioner with its own
# credentials (PKI/local-provisioner.kubeconfig). Idempotent: a running
# provisioner is left alone.
storage_up() {
  kc apply -f "$ROOT/e2e/cluster/manifests/storage.yaml" >/dev/null
  running local-provisioner && return 0
  mkdir -p "$VOLUMES_DIR"
  chmod 0700 "$VOLUMES_DIR"
  start local-provisioner "$BIN/local-provisioner" \
    --kubeconfig "$PKI/local-provisioner.kubeconfig" --root "$VOLUMES_DIR" --v 1
  # It exits at once on a bad kubeconfig or root; a second look catches that.
  sleep 0.5
  running local-provisioner || die "local-provisioner exited: see $LOGS/local-provisioner.log"
}
