#!/usr/bin/env bash
# build-tool.sh DIR PACKAGE NAME [LDFLAGS]: builds PACKAGE from the wrapper
# module in e2e/DIR into $SLUICE_CACHE/NAME/<module version>/NAME, once per
# pinned version, and links it into build/bin.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
bin=${SLUICE_BUILD:-$root/build}/bin
dir=$1 pkg=$2 name=$3 ldflags=${4:-}
cd "$root/e2e/$dir"
version=$(go list -m -f '{{.Version}}' "$(go list -f '{{.Module.Path}}' "$pkg")")
out=$cache/$name/$version/$name
if [[ ! -x $out ]]; then
  echo "==> building $name $version"
  start=$SECONDS
  mkdir -p "$(dirname "$out")"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${ldflags//@VERSION@/$version}" -o "$out.tmp" "$pkg"
  mv "$out.tmp" "$out"
  echo "==> $name $version built in $((SECONDS - start))s"
fi
mkdir -p "$bin"
ln -sf "$out" "$bin/$name"
