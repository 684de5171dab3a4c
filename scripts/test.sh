#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, unit, integration and
# end-to-end tests (which start their own etcd etc.). Installs what is
# missing first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
