#!/usr/bin/env bash
# The two images the local cluster itself needs, built once into
# $SLUICE_CACHE/images: the pod sandbox (pause, a static C program) and CoreDNS
# (the static binary from the e2e/coredns wrapper module). Both FROM scratch.
source "$(dirname "$0")/lib.sh"

pause_src=$ROOT/e2e/images/pause/pause.c
pause_tar=$CACHE/images/pause-3.10-$(md5sum < "$pause_src" | cut -c1-8).tar
if [[ ! -f $pause_tar ]]; then
  echo "==> image sluice.dev/pause:3.10"
  work=$(mktemp -d)
  gcc -Os -static -o "$work/pause" "$pause_src"
  strip "$work/pause"
  c=$(bh from -q scratch)
  bh copy -q "$c" "$work/pause" /pause >/dev/null
  bh config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  bh commit -q --rm "$c" sluice.dev/pause:3.10 >/dev/null
  rm -f "$CACHE"/images/pause-*.tar "$CACHE"/images/pause-*.ref
  save sluice.dev/pause:3.10 "$pause_tar"
  rm -rf "$work"
fi

coredns=$(readlink -f "$BIN/coredns")
build_id=$(basename "$(dirname "$coredns")")   # <version>-<hash>
version=${build_id%-*}
coredns_tar=$CACHE/images/coredns-$build_id.tar
if [[ ! -f $coredns_tar ]]; then
  echo "==> image sluice.dev/coredns:$version"
  c=$(bh from -q scratch)
  bh copy -q "$c" "$coredns" /coredns >/dev/null
  bh config --entrypoint '["/coredns"]' --port 53/udp --port 53/tcp "$c"
  bh commit -q --rm "$c" "sluice.dev/coredns:$version" >/dev/null
  rm -f "$CACHE"/images/coredns-*.tar "$CACHE"/images/coredns-*.ref
  save "sluice.dev/coredns:$version" "$coredns_tar"
fi
