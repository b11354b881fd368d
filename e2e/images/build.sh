#!/usr/bin/env bash
# `make images` without a Docker engine: builds the sluice images with buildah
# and imports them into the local cluster's containerd when it runs (bring-up
# imports them too). No registry is reachable, so nothing is pulled:
#   sluice.dev/sluice-server:dev   FROM scratch, static sluice-server
#   sluice.dev/sluice-bench:dev    FROM scratch, static sluice-bench
#   sluice.dev/redis:dev           Debian rootfs (debootstrap) with Debian's redis-server
#   sluice.dev/sluice-operator:dev Debian rootfs, Python 3.11 venv with operator/
#   quay.io/opstree/redis, redis-sentinel  the images redis-operator runs, on the
#                                  same rootfs (e2e/images/ot-redis, tags from the operator's config)
#   sluice.dev/zaqar-client:test   Debian rootfs with the unchanged python-zaqarclient (the
#                                  e2e suites' client pods; not part of the product, not built by default)
# Tarballs land in build/images/<name>.tar (docker-archive) with <name>.ref.
# Usage: build.sh [server|bench|redis|operator|ot_redis|zaqar_client]... (default: all but zaqar_client)
source "$(dirname "$0")/lib.sh"
OUT=$BUILD/images
mkdir -p "$OUT"
NONROOT=65532

static_go() { # static_go MODULE_DIR PACKAGE OUTPUT
  (cd "$ROOT/$1" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$3" "$2")
}

scratch_image() { # scratch_image REF BINARY NAME
  local ref=$1 binary=$2 name=$3 c
  c=$(bh from -q scratch)
  bh copy -q "$c" "$binary" "/usr/local/bin/$name" >/dev/null
  bh config --entrypoint "[\"/usr/local/bin/$name\"]" --user "$NONROOT:$NONROOT" \
    --label org.opencontainers.image.source=sluice "$c"
  bh commit -q --rm "$c" "$ref" >/dev/null
}

# debian_container: a working container holding the cached Debian rootfs.
debian_container() {
  local rootfs c
  rootfs=$("$ROOT/e2e/images/rootfs.sh")
  c=$(bh from -q scratch)
  bh add -q "$c" "$rootfs" / >/dev/null
  echo "$c"
}

build_server() {
  [[ -d $ROOT/server/cmd/sluice-server ]] || { echo "    skipped: server/cmd/sluice-server not present"; return; }
  static_go server ./cmd/sluice-server "$OUT/bin/sluice-server"
  scratch_image sluice.dev/sluice-server:dev "$OUT/bin/sluice-server" sluice-server
  finish sluice.dev/sluice-server:dev sluice-server
}

build_bench() {
  [[ -d $ROOT/bench-job/cmd/sluice-bench ]] || { echo "    skipped: bench-job/cmd/sluice-bench not present"; return; }
  static_go bench-job ./cmd/sluice-bench "$OUT/bin/sluice-bench"
  scratch_image sluice.dev/sluice-bench:dev "$OUT/bin/sluice-bench" sluice-bench
  finish sluice.dev/sluice-bench:dev sluice-bench
}

build_redis() {
  local c key
  # Rebuilt only when the root filesystem or this script changes.
  key=$({ "$ROOT/e2e/images/rootfs.sh"; md5sum < "$0"; } | md5sum | cut -c1-12)
  if [[ -f $OUT/redis.tar && $(cat "$OUT/redis.key" 2>/dev/null) == "$key" ]]; then
    import "$OUT/redis.tar"
    return
  fi
  c=$(debian_container)
  bh config --entrypoint '["redis-server"]' --cmd '["--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data"]' \
    --user "$(bh run --isolation chroot "$c" -- id -u redis):$(bh run --isolation chroot "$c" -- id -g redis)" --port 6379 --workingdir /data \
    --label org.opencontainers.image.source=sluice "$c"
  bh run --isolation chroot "$c" -- sh -c 'mkdir -p /data && chown redis:redis /data'
  bh commit -q --rm "$c" sluice.dev/redis:dev >/dev/null
  finish sluice.dev/redis:dev redis
  echo "$key" > "$OUT/redis.key"
}

# The redis and sentinel images redis-operator runs, implementing the image
# contract of OT-CONTAINER-KIT/redis (e2e/images/ot-redis/README.md) with
# Debian's redis-server. Tagged with the names the operator's config uses by
# default, so Pools reference them without any setting; rebuilt only when the
# root filesystem, the scripts or the tags change.
build_ot_redis() {
  local src=$ROOT/e2e/images/ot-redis tags key c kind ref
  # The defaults of redis_operator_image / redis_sentinel_image in the operator's config.
  tags=$(sed -n 's/^ *redis_\(operator\|sentinel\)_image: str = "\(.*\)"$/\2/p' "$ROOT/operator/sluice_operator/config.py" | tr '\n' ' ')
  [[ $(wc -w <<<"$tags") == 2 ]] || { echo "cannot read the redis-operator image names from operator/sluice_operator/config.py" >&2; return 1; }
  key=$({ "$ROOT/e2e/images/rootfs.sh"; cat "$src"/*; echo "$tags"; md5sum < "$0"; } | md5sum | cut -c1-12)
  set -- $tags
  for kind in redis sentinel; do
    ref=$1; shift
    if [[ -f $OUT/ot-$kind.tar && $(cat "$OUT/ot-$kind.key" 2>/dev/null) == "$key" ]]; then
      import "$OUT/ot-$kind.tar"
      continue
    fi
    c=$(debian_container)
    bh copy -q "$c" "$src/healthcheck.sh" /usr/bin/healthcheck.sh >/dev/null
    if [[ $kind == redis ]]; then
      bh copy -q "$c" "$src/entrypoint.sh" /usr/bin/entrypoint.sh >/dev/null
      bh copy -q "$c" "$src/redis.base.conf" /etc/redis/redis.base.conf >/dev/null
      bh config --entrypoint '["/usr/bin/entrypoint.sh"]' --env REDIS_PORT=6379 --port 6379 "$c"
    else
      bh copy -q "$c" "$src/entrypoint-sentinel.sh" /usr/bin/entrypoint-sentinel.sh >/dev/null
      bh copy -q "$c" "$src/sentinel.base.conf" /etc/redis/sentinel.base.conf >/dev/null
      bh config --entrypoint '["/usr/bin/entrypoint-sentinel.sh"]' --env SENTINEL_PORT=26379 --port 26379 "$c"
    fi
    # Debian's redis-server becomes redis-sentinel by its program name; uid
    # 1000 with group 0 owning what it writes, as the upstream images do.
    bh run --isolation chroot "$c" -- sh -c '
      ln -sf redis-check-rdb /usr/bin/redis-sentinel &&
      rm -f /etc/redis/redis.conf /etc/redis/sentinel.conf &&
      chmod 0755 /usr/bin/*.sh &&
      mkdir -p /data /node-conf /sentinel-data /etc/redis/external.conf.d &&
      chown -R 1000:0 /etc/redis /data /node-conf /sentinel-data &&
      chmod -R g=u /etc/redis /data /node-conf /sentinel-data'
    bh config --user 1000:0 --workingdir /data --label org.opencontainers.image.source=sluice "$c"
    bh commit -q --rm "$c" "$ref" >/dev/null
    finish "$ref" "ot-$kind"
    echo "$key" > "$OUT/ot-$kind.key"
  done
}

# Wheels are made on the host with Debian's own python3 (the very version the
# image has: markers such as python_full_version < "3.11.3" must agree) and
# cached by the requirements' and Python's versions; the image installs them
# with no network.
build_operator() {
  [[ -f $ROOT/operator/pyproject.toml ]] || { echo "    skipped: operator/ not present yet"; return; }
  local key wheels venv c
  key=$({ cat "$ROOT/operator/requirements.txt"; /usr/bin/python3 --version; } | md5sum | cut -c1-10)
  wheels=$CACHE/wheels/operator-$key
  # The venv also builds the operator's own wheel below, cache or not.
  venv=$BUILD/venv-images
  [[ -x $venv/bin/pip ]] || /usr/bin/python3 -m venv "$venv"
  if [[ ! -f $wheels/.done ]]; then
    mkdir -p "$wheels"
    "$venv/bin/pip" wheel -q --disable-pip-version-check -w "$wheels" -r "$ROOT/operator/requirements.txt"
    touch "$wheels/.done"
  fi
  # The operator's own wheel, built from a copy so operator/ stays untouched.
  rm -rf "$OUT/operator-src" "$OUT/operator-wheel" && mkdir -p "$OUT/operator-src"
  (cd "$ROOT/operator" && cp -r pyproject.toml sluice_operator "$OUT/operator-src/")
  [[ -f $ROOT/operator/README.md ]] && cp "$ROOT/operator/README.md" "$OUT/operator-src/"
  find "$OUT/operator-src" -name __pycache__ -prune -exec rm -rf {} +
  "$venv/bin/pip" wheel -q --disable-pip-version-check --no-deps \
    -w "$OUT/operator-wheel" "$OUT/operator-src"
  c=$(debian_container)
  bh copy -q "$c" "$wheels" /tmp/wheels >/dev/null
  bh copy -q "$c" "$OUT/operator-wheel" /tmp/operator >/dev/null
  bh run --isolation chroot "$c" -- sh -c '
    python3 -m venv /opt/sluice-operator &&
    /opt/sluice-operator/bin/pip install -q --no-index --disable-pip-version-check \
      --find-links /tmp/wheels --find-links /tmp/operator sluice-operator &&
    rm -rf /tmp/wheels /tmp/operator /root/.cache'
  # Benchmark reports are rendered by the operator with sluice-bench itself.
  [[ -x $OUT/bin/sluice-bench ]] || static_go bench-job ./cmd/sluice-bench "$OUT/bin/sluice-bench"
  bh copy -q "$c" "$OUT/bin/sluice-bench" /usr/local/bin/sluice-bench >/dev/null
  bh config --entrypoint '["/opt/sluice-operator/bin/sluice-operator"]' --user "$NONROOT:$NONROOT" \
    --env PYTHONUNBUFFERED=1 --label org.opencontainers.image.source=sluice "$c"
  bh commit -q --rm "$c" sluice.dev/sluice-operator:dev >/dev/null
  finish sluice.dev/sluice-operator:dev sluice-operator
}

# The unchanged python-zaqarclient at the version the compatibility suite
# pins, for client pods that authenticate with their own ServiceAccount token.
build_zaqar_client() {
  local pin key wheels venv c
  pin=$(grep -E '^python-zaqarclient==' "$ROOT/e2e/compat/requirements.txt")
  key=$({ echo "$pin"; /usr/bin/python3 --version; "$ROOT/e2e/images/rootfs.sh"; md5sum < "$0"; } | md5sum | cut -c1-12)
  if [[ -f $OUT/zaqar-client.tar && $(cat "$OUT/zaqar-client.key" 2>/dev/null) == "$key" ]]; then
    import "$OUT/zaqar-client.tar"
    return
  fi
  wheels=$CACHE/wheels/zaqar-client-$(echo "$pin" | md5sum | cut -c1-10)
  venv=$BUILD/venv-images
  [[ -x $venv/bin/pip ]] || /usr/bin/python3 -m venv "$venv"
  if [[ ! -f $wheels/.done ]]; then
    mkdir -p "$wheels"
    "$venv/bin/pip" wheel -q --disable-pip-version-check -w "$wheels" "$pin"
    touch "$wheels/.done"
  fi
  c=$(debian_container)
  bh copy -q "$c" "$wheels" /tmp/wheels >/dev/null
  bh run --isolation chroot "$c" -- sh -c "
    python3 -m venv /opt/zaqar-client &&
    /opt/zaqar-client/bin/pip install -q --no-index --disable-pip-version-check --find-links /tmp/wheels '$pin' &&
    rm -rf /tmp/wheels /root/.cache"
  bh config --entrypoint '["/opt/zaqar-client/bin/python"]' --user "$NONROOT:$NONROOT" \
    --env PYTHONUNBUFFERED=1 --label org.opencontainers.image.source=sluice "$c"
  bh commit -q --rm "$c" sluice.dev/zaqar-client:test >/dev/null
  finish sluice.dev/zaqar-client:test zaqar-client
  echo "$key" > "$OUT/zaqar-client.key"
}

finish() { # finish REF NAME
  save "$1" "$OUT/$2.tar"
  import "$OUT/$2.tar"
}

targets=("$@")
((${#targets[@]})) || targets=(server bench redis operator ot_redis)
for t in "${targets[@]}"; do
  start=$SECONDS
  echo "==> image $t"
  "build_$t"
  echo "    $t done in $((SECONDS - start))s"
done
