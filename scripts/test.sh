#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, unit, integration and
# end-to-end tests (which start their own etcd etc.). Installs what is
# missing first. Ends with one "N passed, N failed" line for the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --all-targets 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
