# Sourced by the smoke scripts: the repository root, kubectl and the
# kubeconfig of the cluster instance (SLUICE_INSTANCE) they run against.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
KUBECTL=${KUBECTL:-$BUILD/bin/kubectl}
[[ -x $KUBECTL ]] || KUBECTL=kubectl
export KUBECONFIG=${KUBECONFIG:-${KUBECONFIG_PATH:?set by make (mk/common.mk)}}
k() { "$KUBECTL" "$@"; }
