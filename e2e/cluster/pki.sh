#!/usr/bin/env bash
# Certificates and kubeconfigs for the local cluster (ECDSA P-256, made once
# per clone under build/kube/pki; a new CA is made only when they are missing).
source "$(dirname "$0")/lib.sh"

mkdir -p "$PKI"
cd "$PKI"

cert() { # cert NAME CN ORG SANS(or "") KIND(client|server|both)
  local name=$1 cn=$2 org=$3 sans=$4 kind=$5 usage
  [[ -f $name.crt && -f $name.key ]] && return 0
  case $kind in
    client) usage=clientAuth ;;
    server) usage=serverAuth ;;
    both) usage=serverAuth,clientAuth ;;
  esac
  openssl ecparam -name prime256v1 -genkey -noout -out "$name.key" 2>/dev/null
  local subj="/CN=$cn"
  [[ -n $org ]] && subj="/O=$org$subj"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } > "$name.ext"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

if [[ ! -f ca.crt || ! -f ca.key ]]; then
  rm -f ./*.crt ./*.key ./*.pub ./*.kubeconfig
  openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -subj "/CN=sluice-local-ca" -days 3650 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,digitalSignature,keyCertSign,cRLSign" -out ca.crt 2>/dev/null
fi

api_sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
api_sans+=",DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost"
api_sans+=",IP:127.0.0.1,IP:$NODE_IP,IP:$KUBE_SERVICE_IP"
cert apiserver kube-apiserver "" "$api_sans" server
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" client
cert admin sluice-admin system:masters "" client
cert controller-manager system:kube-controller-manager "" "" client
cert scheduler system:kube-scheduler "" "" client
cert kube-proxy system:kube-proxy "" "" client
cert kubelet "system:node:$NODE_NAME" system:nodes "" client
cert kubelet-serving "system:node:$NODE_NAME" system:nodes "DNS:$NODE_NAME,IP:$NODE_IP,IP:127.0.0.1" server
cert kwok sluice-kwok system:masters "" client
# The volume provisioner gets only what its ClusterRole grants (storage.sh).
cert local-provisioner sluice:local-provisioner "" "" client
if [[ ! -f sa.key ]]; then
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
fi

kubeconfig() { # kubeconfig FILE USER CERTNAME
  local file=$1 user=$2 name=$3
  # Written aside and renamed: a running cluster's users may be reading it.
  (umask 077; cat > "$file.tmp") <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sluice-local
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 < ca.crt)
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 < "$name.crt")
    client-key-data: $(base64 -w0 < "$name.key")
contexts:
- name: sluice-local
  context:
    cluster: sluice-local
    user: $user
current-context: sluice-local
EOF
  mv -f "$file.tmp" "$file"
}
kubeconfig controller-manager.kubeconfig system:kube-controller-manager controller-manager
kubeconfig scheduler.kubeconfig system:kube-scheduler scheduler
kubeconfig kube-proxy.kubeconfig system:kube-proxy kube-proxy
kubeconfig kubelet.kubeconfig "system:node:$NODE_NAME" kubelet
kubeconfig kwok.kubeconfig sluice-kwok kwok
kubeconfig local-provisioner.kubeconfig sluice:local-provisioner local-provisioner
kubeconfig "$KUBECONFIG_PATH" sluice-admin admin
chmod 600 ./*.key "$KUBECONFIG_PATH" ./*.kubeconfig
