# The real node: containerd, CNI, kubelet, kube-proxy and CoreDNS (sourced by
# up.sh). Everything runs from configuration written here, with its own
# sockets and state directories; nothing reads /etc/containerd or /etc/cni.

PAUSE_IMAGE=sluice.dev/pause:3.10
COREDNS_IMAGE=sluice.dev/coredns:v1.14.5

write_node_config() {
  mkdir -p "$CONF" "$RUN_DIR/cni/net.d" "$RUN_DIR/containerd" "$DATA_DIR"
  cat > "$CONF/containerd.toml" <<EOF
version = 2
root = "$DATA_DIR/containerd"
state = "$RUN_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox refuses a negative oom_score_adj even to root.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN_DIR/runc"
EOF
  cat > "$RUN_DIR/cni/net.d/10-sluice.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "sluice-pods",
  "plugins": [{
    "type": "bridge",
    "bridge": "$CNI_DEV",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$RUN_DIR/cni/ipam",
      "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "${NODE_POD_CIDR%0/24}1"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF
  cat > "$CONF/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $((10250 + PORT_BASE))
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((10248 + PORT_BASE))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
containerRuntimeEndpoint: $CRI_ENDPOINT
imageServiceEndpoint: $CRI_ENDPOINT
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: $CLUSTER_DOMAIN
podCIDR: $NODE_POD_CIDR
# Images are imported, never pulled: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
maxPods: 110
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 0s
staticPodPath: ""
EOF
  cat > "$CONF/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$((10256 + PORT_BASE))
metricsBindAddress: 127.0.0.1:$((10249 + PORT_BASE))
nodePortAddresses: [$NODE_IP/32]
iptables: {localhostNodePorts: false}
# Leave the machine's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# Forwarding for the pod bridge, and a fence: pod traffic may only go to the
# pod bridge or to this machine itself, never out through another interface.
setup_forwarding() {
  mkdir -p "$RUN_DIR/sysctl"
  local key
  for key in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables \
             vm.overcommit_memory kernel.panic kernel.panic_on_oops; do
    [[ -f $RUN_DIR/sysctl/$key ]] || sysctl -n "$key" > "$RUN_DIR/sysctl/$key"
  done
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  ipt_ensure filter FORWARD -s "$POD_CIDR" ! -o "$CNI_DEV" -j DROP
  ipt_ensure filter FORWARD -d "$POD_CIDR" ! -i "$CNI_DEV" ! -o "$CNI_DEV" -j DROP
}

# ipt_ensure TABLE CHAIN RULE... : inserts the rule, tagged, unless present.
ipt_ensure() {
  local table=$1 chain=$2; shift 2
  iptables -w -t "$table" -C "$chain" "$@" -m comment --comment "$IPT_TAG" 2>/dev/null ||
    iptables -w -t "$table" -I "$chain" 1 "$@" -m comment --comment "$IPT_TAG"
}

ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# Imports the pause and CoreDNS images plus every image `make images` left in
# build/images (docker-archive tarballs), skipping those already present.
import_images() {
  local tar have
  have=$(ctr_ images ls -q)
  for tar in "$CACHE"/images/pause-*.tar "$CACHE"/images/coredns-*.tar "$BUILD"/images/*.tar; do
    [[ -f $tar ]] || continue
    local ref
    ref=$(cat "${tar%.tar}.ref" 2>/dev/null || true)
    if [[ -n $ref ]] && grep -qxF "$ref" <<<"$have"; then continue; fi
    ctr_ images import --no-unpack=false "$tar" >/dev/null
  done
}

start_containerd() {
  start containerd "$(command -v containerd)" --config "$CONF/containerd.toml"
  wait_for containerd 20 ctr --address "$CONTAINERD_SOCK" version
}

start_kubelet() {
  start kubelet "$BIN/kubelet" --config "$CONF/kubelet.yaml" \
    --kubeconfig "$PKI/kubelet.kubeconfig" --root-dir "$DATA_DIR/kubelet" \
    --cert-dir "$DATA_DIR/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --node-labels "sluice.dev/node-class=metal,sluice.dev/node-type=real,topology.kubernetes.io/zone=zone-0" \
    --v 1
}

start_kube_proxy() {
  start kube-proxy "$BIN/kube-proxy" --config "$CONF/kube-proxy.yaml" --v 1
}

node_ready() {
  [[ $(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

deploy_coredns() {
  sed -e "s|@IMAGE@|$COREDNS_IMAGE|" -e "s|@DNS_IP@|$DNS_SERVICE_IP|" \
      -e "s|@DOMAIN@|$CLUSTER_DOMAIN|" "$ROOT/e2e/cluster/manifests/coredns.yaml" | kc apply -f - >/dev/null
}

coredns_ready() {
  [[ $(kc -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}') == 1 ]]
}

node_up() {
  log "containerd, CNI ($CNI_DEV, $NODE_POD_CIDR), forwarding fence"
  write_node_config
  setup_forwarding
  start_containerd
  log "importing images"
  import_images
  log "kubelet, kube-proxy"
  start_kubelet
  start_kube_proxy
  wait_for "node $NODE_NAME Ready" 90 node_ready
  # A control plane started alone had untainted simulated nodes.
  kc taint nodes -l type=kwok kwok.x-k8s.io/node=fake:NoSchedule --overwrite >/dev/null
  log "CoreDNS"
  deploy_coredns
  wait_for "CoreDNS ready" 90 coredns_ready
}
