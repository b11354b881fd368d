#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries from the e2e/k8s wrapper module into
# $SLUICE_CACHE/kubernetes/<version>/bin and links them into build/bin.
# The cache is keyed by the pinned version, so a second clone (or a second
# run) costs nothing; changing the pin in e2e/k8s/go.mod triggers a rebuild.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
bin=${SLUICE_BUILD:-$root/build}/bin
mod=$root/e2e/k8s
cd "$mod"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
out=$cache/kubernetes/$version/bin
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

missing=()
for c in "${cmds[@]}"; do [[ -x $out/$c ]] || missing+=("$c"); done
if ((${#missing[@]})); then
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  echo "==> building Kubernetes $version (${missing[*]}) into $out"
  start=$SECONDS
  mkdir -p "$out.tmp"
  for c in "${missing[@]}"; do
    CGO_ENABLED=0 go build -trimpath -tags=selinux,notest -ldflags="$ldflags" \
      -o "$out.tmp/$c" "k8s.io/kubernetes/cmd/$c"
  done
  mkdir -p "$out"
  mv "$out.tmp"/* "$out"/ && rmdir "$out.tmp"
  echo "==> Kubernetes $version built in $((SECONDS - start))s"
fi
mkdir -p "$bin"
for c in "${cmds[@]}"; do ln -sf "$out/$c" "$bin/$c"; done
