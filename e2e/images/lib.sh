# Image helpers (sourced): buildah with its own storage, so image builds never
# touch another user's containers/storage, and docker-archive export.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
BIN=$BUILD/bin
CACHE=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
BUILDAH=(buildah --root "$CACHE/buildah/storage" --runroot /run/sluice-buildah --storage-driver overlay)
sfx=""
[[ ${SLUICE_INSTANCE:-0} == 0 ]] || sfx="-$SLUICE_INSTANCE"
CONTAINERD_SOCK=/run/sluice$sfx/containerd/containerd.sock

bh() { "${BUILDAH[@]}" "$@"; }

# save REF TAR : exports a built image as a docker-archive tarball (the form
# both `ctr images import` and `kind load image-archive` take), and records
# its name beside it.
save() {
  local ref=$1 tar=$2
  mkdir -p "$(dirname "$tar")"
  rm -f "$tar"
  bh push -q "$ref" "docker-archive:$tar:$ref" >/dev/null
  echo "$ref" > "${tar%.tar}.ref"
}

# import TAR : into the local cluster's containerd (k8s.io namespace) when it runs.
import() {
  local tar=$1
  if [[ -S $CONTAINERD_SOCK ]] && ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; then
    ctr --address "$CONTAINERD_SOCK" --namespace k8s.io images import "$tar" >/dev/null
    echo "    imported $(cat "${tar%.tar}.ref") into the local cluster"
  fi
}
