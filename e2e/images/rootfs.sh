#!/usr/bin/env bash
# Makes the Debian root filesystem that the redis and operator images start
# from (no registry is reachable, so no FROM pulls): mmdebstrap (debootstrap's
# apt-based successor: apt resolves the dependencies, so it takes a minute, not
# many) from the machine's own apt mirror, cached as a tarball in $SLUICE_CACHE keyed by the
# suite and package list. Prints the tarball's path.
set -euo pipefail
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
suite=bookworm
packages=python3,python3-venv,redis-server,ca-certificates,tzdata
key=$(echo "$suite $packages" | md5sum | cut -c1-10)
out=$cache/rootfs/debian-$suite-$key.tar
if [[ -f $out ]]; then echo "$out"; exit 0; fi

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[[ -n $mirror ]] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[[ -n $mirror ]] || mirror=http://deb.debian.org/debian
mkdir -p "$(dirname "$out")"
echo "==> mmdebstrap $suite ($packages) from $mirror" >&2
log=$(mktemp)
# Trim what an image never needs while the tarball is made.
if ! mmdebstrap --mode=root --format=tar --variant=minbase --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    "$suite" "$out.tmp" "$mirror" >"$log" 2>&1; then
  tail -20 "$log" >&2
  rm -f "$out.tmp" "$log"
  exit 1
fi
rm -f "$log"
mv "$out.tmp" "$out"
echo "$out"
