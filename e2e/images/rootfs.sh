#!/usr/bin/env bash
# Makes the Debian root filesystem that the redis and operator images start
# from (no registry is reachable, so no FROM pulls): debootstrap from the
# machine's own apt mirror, cached as a tarball in $SLUICE_CACHE keyed by the
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
work=$(mktemp -d /var/tmp/sluice-rootfs.XXXXXX)
trap 'umount -R "$work/root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
echo "==> debootstrap $suite ($packages) from $mirror" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$work/root" "$mirror" >"$work/log" 2>&1 ||
  { tail -20 "$work/log" >&2; exit 1; }
# Trim what an image never needs.
rm -rf "$work"/root/var/cache/apt/archives/*.deb "$work"/root/var/lib/apt/lists/* \
       "$work"/root/usr/share/doc/* "$work"/root/usr/share/man/* "$work"/root/usr/share/info/*
mkdir -p "$(dirname "$out")"
tar -C "$work/root" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "$out"
