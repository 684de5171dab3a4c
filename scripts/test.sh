#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, unit, integration and
# end-to-end tests (which start their own etcd etc.). Installs what is
# missing first. Ends with one "N passed, N failed" line for the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo fmt --all --check

# A clean clone under CI builds once: incremental caches only cost disk there.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
# Say so plainly when the disk is nearly full rather than failing in the linker.
avail_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${avail_kb:-0}" -lt 6000000 ]; then
  echo "warning: only $((avail_kb / 1024)) MiB free under $(pwd); a clean test build needs about 5 GiB" >&2
fi

log=$(mktemp)
trace=$(mktemp)
trap 'rm -f "$log" "$trace"' EXIT
# Under CI (or SKIFF_CHECK_PACKAGES=1) the build and the tests run under
# strace (opens and execs only), and scripts/check-packages.sh fails the run
# if they read a Debian package that neither the image nor deps.sh installs.
traced=()
if [ -n "${CI:-}${SKIFF_CHECK_PACKAGES:-}" ] && command -v strace >/dev/null; then
  traced=(strace -f --seccomp-bpf -qq -e trace=openat,execve -e status=successful -A -o "$trace")
fi
"${traced[@]}" cargo clippy --workspace --all-targets -- -D warnings

status=0
"${traced[@]}" cargo test --workspace --all-targets 2>&1 | tee "$log" || status=$?
if [ ${#traced[@]} -gt 0 ]; then
  scripts/check-packages.sh "$trace" || status=1
fi
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
