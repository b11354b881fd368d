#!/bin/bash
# Entrypoint of sluice.dev's build of the redis image redis-operator runs
# (tagged quay.io/opstree/redis:<tag>). It honours the environment contract of
# OT-CONTAINER-KIT/redis (entrypoint.sh at commit 066d6228, see README.md
# beside this file) with Debian's redis-server: the operator sets
# SERVER_MODE/SETUP_MODE, REDIS_PORT, REDIS_PASSWORD, PERSISTENCE_ENABLED,
# TLS_MODE + REDIS_TLS_*, ACL_MODE, and mounts the external config.
set -euo pipefail

# REDIS_CONF_DIR is ours (tests run the script outside an image).
conf_dir=${REDIS_CONF_DIR:-/etc/redis}
conf=$conf_dir/redis.conf
data_dir=${DATA_DIR:-/data}
node_conf_dir=${NODE_CONF_DIR:-/node-conf}
external=${EXTERNAL_CONFIG_FILE:-$conf_dir/external.conf.d/redis-additional.conf}
port=${REDIS_PORT:-6379}
mode=${SETUP_MODE:-standalone}

# A fresh configuration from the image's base at every start: a restarted
# container must not append the same lines twice.
cp "$conf_dir/redis.base.conf" "$conf"
add() { printf '%s\n' "$@" >> "$conf"; }

mkdir -p "$data_dir" "$node_conf_dir"

if [[ -n ${REDIS_PASSWORD:-} ]]; then
  add "masterauth ${REDIS_PASSWORD}" "requirepass ${REDIS_PASSWORD}" "protected-mode yes"
else
  add "protected-mode no"
fi

if [[ $mode == cluster ]]; then
  add "cluster-enabled yes" "cluster-node-timeout 5000" "cluster-require-full-coverage no" \
      "cluster-migration-barrier 1" "cluster-config-file ${node_conf_dir}/nodes.conf"
  pod_ip=$(hostname -i)
  # This node's own line keeps its old address after a restart.
  [[ -f $node_conf_dir/nodes.conf ]] &&
    sed -i -e "/myself/ s/[0-9]\{1,3\}\(\.[0-9]\{1,3\}\)\{3\}/${pod_ip}/" "$node_conf_dir/nodes.conf"
fi

# Persistence: RDB snapshots and an append-only file in the data volume.
if [[ ${PERSISTENCE_ENABLED:-false} == true ]]; then
  add "save 900 1" "save 300 10" "save 60 10000" "appendonly yes" 'appendfilename "appendonly.aof"' "dir ${data_dir}"
fi

if [[ ${TLS_MODE:-false} == true ]]; then
  add "tls-cert-file ${REDIS_TLS_CERT}" "tls-key-file ${REDIS_TLS_CERT_KEY}" "tls-ca-cert-file ${REDIS_TLS_CA_KEY}" \
      "tls-auth-clients optional" "tls-replication yes" "port 0" "tls-port ${port}"
  [[ $mode == cluster ]] && add "tls-cluster yes" "cluster-preferred-endpoint-type hostname"
else
  add "port ${port}"
fi

[[ ${ACL_MODE:-false} == true ]] && add "aclfile $conf_dir/user.acl"

if [[ $mode == cluster ]]; then
  add "cluster-announce-ip ${pod_ip}" "cluster-announce-hostname $(hostname)"
fi

[[ -f $external ]] && add "include ${external}"

echo "starting redis-server (${mode}, port ${port}, persistence ${PERSISTENCE_ENABLED:-false})"
exec redis-server "$conf"
