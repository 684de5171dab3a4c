#!/usr/bin/env bash
# Installs what building and testing Skiff needs on a fresh Debian 12
# machine (as root). Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  protobuf-compiler   # protoc: etcd-client compiles etcd's .proto files
  libprotobuf-dev     # google/protobuf/*.proto, which those files import (not a
                      # recommends of protobuf-compiler with --no-install-recommends)
  etcd-server         # the etcd backend's tests and benchmark start their own etcd
  pkg-config
  curl                # raw HTTPS checks in the API tests
  kubectl             # the versioned kubectl binaries the end-to-end tests drive
  # The node agent's runtime (see ../shared/docs/containerd.md):
  containerd          # the CRI runtime the agent supervises
  runc
  containernetworking-plugins   # bridge, host-local, portmap, loopback in /usr/lib/cni
  iptables            # bridge ipMasq and portmap call it; without it a pod cannot be torn down
  busybox-static      # the offline docker.io/library/busybox:latest image is built from it
  docker-registry     # the image-pull tests start a local registry
  skopeo              # pushes test images to the local registry
  fatrace             # scripts/test.sh: which system files the build and tests open
  nftables            # nft: the service proxy programs its table with `nft -f` batches
  dnsmasq-base        # the DNS tests' upstream resolver and the DNS benchmark's baseline
  dnsperf             # the DNS benchmark's load generator
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "deps: cargo is not installed; install the Rust toolchain (rustup) first" >&2
  exit 1
fi

# The Python `kubernetes` client, one of the judges of API compatibility.
venv=.venv
if ! "$venv/bin/python" -c "import kubernetes" >/dev/null 2>&1; then
  echo "deps: creating $venv with the Python kubernetes client" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes==37.*"
fi
