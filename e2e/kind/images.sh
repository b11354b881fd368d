#!/usr/bin/env bash
# `make images CLUSTER=kind`: the project's Dockerfiles, built by Docker and
# loaded into kind under the same names as the buildah path.
source "$(dirname "$0")/lib.sh"
kind=$(kind_bin)
build() { # build REF DOCKERFILE CONTEXT
  if [[ ! -f $ROOT/$2 ]]; then echo "    skipped $1: $2 not present"; return; fi
  docker build -t "$1" -f "$ROOT/$2" "$ROOT/$3"
  "$kind" load docker-image --name "$CLUSTER_NAME" "$1"
}
build sluice.dev/sluice-server:dev server/Dockerfile server
build sluice.dev/sluice-bench:dev bench-job/Dockerfile bench-job
build sluice.dev/sluice-operator:dev operator/Dockerfile operator
# Debian's redis-server, as on the buildah path.
docker build -t sluice.dev/redis:dev -f "$ROOT/e2e/images/redis.Dockerfile" "$ROOT/e2e/images"
"$kind" load docker-image --name "$CLUSTER_NAME" sluice.dev/redis:dev
