#!/usr/bin/env bash
# Installs what is missing, builds Skiff and starts a single-node cluster.
#   SKIFF_DATA_DIR  where state lives (default /var/lib/skiff)
#   SKIFF_PORT      HTTPS port of the API server (default 6443)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release -p skiff

data_dir=${SKIFF_DATA_DIR:-/var/lib/skiff}
port=${SKIFF_PORT:-6443}
cat >&2 <<MSG
Starting skiff server (https://127.0.0.1:$port, data dir $data_dir).
To point kubectl at it (the server writes the file as it starts):
  export KUBECONFIG=$data_dir/admin.kubeconfig
  kubectl get nodes
  kubectl run web --image=busybox -- httpd -f -p 8080
  kubectl wait --for=condition=Ready pod/web
  curl http://\$(kubectl get pod web -o jsonpath='{.status.podIP}'):8080/
MSG
exec ./target/release/skiff server --data-dir "$data_dir" --https-listen-port "$port"
