#!/bin/bash
# Readiness and liveness probe of both images (redis-operator runs
# `bash /usr/bin/healthcheck.sh`): PING this pod's server or sentinel.
port=${REDIS_PORT:-6379}
[[ ${SERVER_MODE:-} == sentinel || ${SETUP_MODE:-} == sentinel ]] && port=${SENTINEL_PORT:-26379}
[[ -n ${REDIS_PASSWORD:-} ]] && export REDISCLI_AUTH=$REDIS_PASSWORD
tls=()
[[ ${TLS_MODE:-false} == true ]] && tls=(--tls --cert "$REDIS_TLS_CERT" --key "$REDIS_TLS_CERT_KEY" --cacert "$REDIS_TLS_CA_KEY")
out=$(redis-cli "${tls[@]}" -h "$(hostname)" -p "$port" ping) || exit 1
[[ $out == PONG ]]
