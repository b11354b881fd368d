#!/bin/bash
# Entrypoint of sluice.dev's build of the sentinel image redis-operator runs
# (tagged quay.io/opstree/redis-sentinel:<tag>): the environment contract of
# OT-CONTAINER-KIT/redis entrypoint-sentinel.sh (commit 066d6228) on Debian's
# redis-server in sentinel mode. The operator passes the master it found as
# MASTER_GROUP_NAME, IP, PORT and QUORUM, and the failure-detection timings.
set -euo pipefail

# REDIS_CONF_DIR is ours (tests run the script outside an image).
conf_dir=${REDIS_CONF_DIR:-/etc/redis}
conf=$conf_dir/sentinel.conf
group=${MASTER_GROUP_NAME:-mymaster}
external=${EXTERNAL_CONFIG_FILE:-$conf_dir/external.conf.d/redis-sentinel-additional.conf}
port=${SENTINEL_PORT:-26379}

# Sentinel rewrites its own file as it learns replicas and other sentinels;
# each container start begins again from what the operator said.
cp "$conf_dir/sentinel.base.conf" "$conf"
add() { printf '%s\n' "$@" >> "$conf"; }

if [[ -n ${REDIS_PASSWORD:-} ]]; then
  add "masterauth ${REDIS_PASSWORD}" "requirepass ${REDIS_PASSWORD}" "protected-mode yes"
else
  add "protected-mode no"
fi

add "sentinel monitor ${group} ${IP:-0.0.0.0} ${PORT:-6379} ${QUORUM:-2}" \
    "sentinel down-after-milliseconds ${group} ${DOWN_AFTER_MILLISECONDS:-30000}" \
    "sentinel parallel-syncs ${group} ${PARALLEL_SYNCS:-1}" \
    "sentinel failover-timeout ${group} ${FAILOVER_TIMEOUT:-180000}" \
    "sentinel resolve-hostnames ${RESOLVE_HOSTNAMES:-no}" \
    "sentinel announce-hostnames ${ANNOUNCE_HOSTNAMES:-no}"
[[ -n ${MASTER_PASSWORD:-} ]] && add "sentinel auth-pass ${group} ${MASTER_PASSWORD}"
[[ -n ${SENTINEL_ID:-} ]] && add "sentinel myid $(printf '%s\n' "$SENTINEL_ID" | sha1sum | cut -d' ' -f1)"

add "port ${port}"
[[ ${ACL_MODE:-false} == true ]] && add "aclfile $conf_dir/user.acl"
if [[ ${TLS_MODE:-false} == true ]]; then
  add "port 0" "tls-port ${port}" "tls-cert-file ${REDIS_TLS_CERT}" "tls-key-file ${REDIS_TLS_CERT_KEY}" \
      "tls-ca-cert-file ${REDIS_TLS_CA_KEY}" "tls-auth-clients optional"
fi
[[ -f $external ]] && add "include ${external}"

echo "starting redis-sentinel on ${port}: monitor ${group} ${IP:-0.0.0.0}:${PORT:-6379} quorum ${QUORUM:-2}"
exec redis-sentinel "$conf"
