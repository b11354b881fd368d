#!/usr/bin/env bash
# build-tool.sh DIR PACKAGE NAME VERSION_MODULE: builds PACKAGE of the wrapper
# module in e2e/DIR into $SLUICE_CACHE/NAME/<version>-<hash>/NAME, where
# version is the pinned version of VERSION_MODULE and hash covers the wrapper's
# go.mod, go.sum and Go files; links it into build/bin.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
bin=${SLUICE_BUILD:-$root/build}/bin
dir=$1 pkg=$2 name=$3 vmod=$4
cd "$root/e2e/$dir"
version=$(go list -m -f '{{.Version}}' "$vmod")
hash=$(cat go.mod go.sum $(ls ./*.go 2>/dev/null) | md5sum | cut -c1-8)
out=$cache/$name/$version-$hash/$name
if [[ ! -x $out ]]; then
  echo "==> building $name $version"
  start=$SECONDS
  mkdir -p "$(dirname "$out")"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out.tmp" "$pkg"
  mv "$out.tmp" "$out"
  echo "==> $name $version built in $((SECONDS - start))s"
fi
mkdir -p "$bin"
ln -sfn "$out" "$bin/$name"
