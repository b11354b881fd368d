# Control plane: network, etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok and the simulated nodes (sourced by up.sh).

# The port-less bridge that carries the node address and the routes that keep
# every pod and service address on this machine.
setup_node_network() {
  if ! ip link show "$NODE_DEV" >/dev/null 2>&1; then
    ip link add "$NODE_DEV" type bridge
  fi
  ip link set "$NODE_DEV" up
  ip addr replace "$NODE_IP/32" dev "$NODE_DEV"
  ip route replace "$POD_CIDR" dev "$NODE_DEV" src "$NODE_IP"
  ip route replace "$SERVICE_CIDR" dev "$NODE_DEV" src "$NODE_IP"
}

start_etcd() {
  # etcd's data lives on a tmpfs of its own: a throwaway cluster needs no
  # durability, and fsync on the shared disk would slow every write.
  mkdir -p "$RUN_DIR/etcd"
  mountpoint -q "$RUN_DIR/etcd" || mount -t tmpfs -o size=1g,mode=0700 sluice-etcd "$RUN_DIR/etcd"
  start etcd "$(command -v etcd)" --name sluice --data-dir "$RUN_DIR/etcd/data" \
    --listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
    --listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
    --initial-cluster "sluice=http://$ETCD_PEER" --listen-metrics-urls "" \
    --quota-backend-bytes 1073741824 --snapshot-count 10000 --log-level warn
}

start_apiserver() {
  start kube-apiserver "$BIN/kube-apiserver" \
    --advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --etcd-servers "http://$ETCD_CLIENT" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --anonymous-auth=true \
    --client-ca-file "$PKI/ca.crt" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --profiling=false --v 1
}

apiserver_ready() {
  curl -sf --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://$NODE_IP:$APISERVER_PORT/readyz" >/dev/null
}

start_controllers() {
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port $((10257 + PORT_BASE)) --leader-elect=false \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --use-service-account-credentials=true \
    --service-cluster-ip-range "$SERVICE_CIDR" --cluster-cidr "$POD_CIDR" --allocate-node-cidrs=false \
    --profiling=false --v 1
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" \
    --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port $((10259 + PORT_BASE)) --leader-elect=false \
    --profiling=false --v 1
}

# kwok plays kubelet for the nodes labelled type=kwok: it keeps them Ready and
# marks pods bound to them Running (they never run anywhere).
start_kwok() {
  # kwok's client otherwise asks for streaming watch-lists, which this etcd
  # cannot serve: every watch then falls back after a timeout, and simulated
  # pods took ~45 s to start and to go away.
  # Node leases are the simulated nodes' heartbeat, as a kubelet's are: kwok's
  # full status updates came only every 70-85 s on a busy machine, past the
  # node lifecycle controller's grace period, so nodes went Unknown and their
  # pods NotReady between updates.
  start kwok env KUBE_FEATURE_WatchListClient=false "$BIN/kwok" --kubeconfig "$PKI/kwok.kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-label-selector type=kwok \
    --node-ip "$NODE_IP" --cidr $POD_NET.255.0/24 --node-port 0 --node-lease-duration-seconds 40
}

# Simulated nodes: sim-metal-N and sim-virtual-N. Each gets a slice of the pod
# range (so even their fake pod addresses stay inside the locally routed range).
create_sim_nodes() {
  local i n=1 manifest=$CONF/sim-nodes.yaml class count taints=""
  # With a real node present, pods must not land on simulated nodes by
  # accident: the simulated ones then carry kwok's taint.
  if [[ ${1:-} == full ]]; then
    taints="  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]"
  fi
  mkdir -p "$CONF"
  : > "$manifest"
  for class in metal virtual; do
    count=$KWOK_SIM_METAL
    [[ $class == virtual ]] && count=$KWOK_SIM_VIRTUAL
    for ((i = 1; i <= count; i++)); do
      cat >> "$manifest" <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: sim-$class-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: sim-$class-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    sluice.dev/node-class: $class
    sluice.dev/node-type: simulated
    topology.kubernetes.io/zone: zone-$(( (i - 1) % 2 == 0 ? 0 : 1 ))
spec:
  podCIDR: $POD_NET.$n.0/24
  podCIDRs: [$POD_NET.$n.0/24]
$taints
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
  capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kubeletVersion: fake
    kubeProxyVersion: fake
EOF
      n=$((n + 1))
    done
  done
  kc apply -f "$manifest" >/dev/null
}

sim_nodes_ready() {
  local want=$((KWOK_SIM_METAL + KWOK_SIM_VIRTUAL)) got
  got=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
  [[ $got -eq $want ]]
}

controlplane_up() { # controlplane_up MODE (controlplane|full)
  log "network: $NODE_DEV $NODE_IP, routes for $POD_CIDR and $SERVICE_CIDR"
  setup_node_network
  log "etcd"
  start_etcd
  wait_for etcd 20 curl -sf --max-time 1 "http://$ETCD_CLIENT/health"
  log "kube-apiserver"
  start_apiserver
  wait_for kube-apiserver 60 apiserver_ready
  log "kube-controller-manager, kube-scheduler, kwok"
  start_controllers
  start_kwok
  create_sim_nodes "$1"
  wait_for "simulated nodes Ready" 30 sim_nodes_ready
  wait_for "default service account" 30 kc get serviceaccount default -n default
}
