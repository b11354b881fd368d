# kind helpers (sourced). kind comes from PATH, or is built from its Go module.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
BIN=$BUILD/bin
KUBECONFIG_PATH=${KUBECONFIG_PATH:?set by make (mk/common.mk)}
KIND_VERSION=${KIND_VERSION:-v0.30.0}
CLUSTER_NAME=sluice
kind_bin() {
  if command -v kind >/dev/null; then command -v kind; return; fi
  if [[ ! -x $BIN/kind ]]; then
    echo "==> building kind $KIND_VERSION" >&2
    GOBIN=$BIN go install "sigs.k8s.io/kind@$KIND_VERSION" >&2
  fi
  echo "$BIN/kind"
}
kubectl_bin() {
  if [[ -x $BIN/kubectl ]]; then echo "$BIN/kubectl"; elif command -v kubectl >/dev/null; then command -v kubectl;
  else "$ROOT/e2e/cluster/build-kubernetes.sh" >&2; echo "$BIN/kubectl"; fi
}
