#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, unit, integration and
# end-to-end tests (which start their own etcd etc.). Installs what is
# missing first. Ends with one "N passed, N failed" line for the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo fmt --all --check
# Modules of one folder may not use each other in a circle (see the script).
python3 scripts/check-cycles.py crates/apiserver/src crates/node/src

# A clean clone under CI builds once: incremental caches only cost disk there.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
# Say so plainly when the disk is nearly full rather than failing in the linker.
avail_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
# A clean test build of the workspace measured 20 GiB on 2026-12-06 (about
# 50 test binaries of 400 MB each, mostly unoptimised code and symbols).
if [ "${avail_kb:-0}" -lt 25000000 ]; then
  echo "warning: only $((avail_kb / 1024)) MiB free under $(pwd); a clean test build needs about 20 GiB" >&2
fi

log=$(mktemp)
tracedir=$(mktemp -d)
trace=$tracedir/opens   # fatrace creates it (it will not write over a file)
# Under CI (or SKIFF_CHECK_PACKAGES=1) fatrace records the system files
# every process opens or runs while the build and the tests run, and
# scripts/check-packages.sh fails the run if one belongs to a Debian package
# that neither the image nor deps.sh installs. fatrace listens through
# fanotify and does not touch the processes; strace -f --seccomp-bpf did,
# and when it lost a tracee the traced tree's opens failed with ENOSYS.
fatrace_pid=
stop_fatrace() {
  [ -n "$fatrace_pid" ] || return 0
  kill -TERM "$fatrace_pid" 2>/dev/null || true
  wait "$fatrace_pid" 2>/dev/null || true
  fatrace_pid=
}
trap 'stop_fatrace; rm -rf "$log" "$tracedir"' EXIT
if [ -n "${CI:-}${SKIFF_CHECK_PACKAGES:-}" ] && command -v fatrace >/dev/null; then
  fatrace -f O -o "$trace" &
  fatrace_pid=$!
  # Its marks are set once it reports a probe file being opened.
  probe=$(mktemp --suffix=.skiff-fatrace-probe)
  for _ in $(seq 200); do
    cat "$probe"
    grep -q -F "$probe" "$trace" && break
    kill -0 "$fatrace_pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q -F "$probe" "$trace" || { echo "check-packages: fatrace did not start" >&2; exit 1; }
  rm -f "$probe"
fi

cargo clippy --workspace --all-targets -- -D warnings

status=0
cargo test --workspace --all-targets 2>&1 | tee "$log" || status=$?
if [ -n "$fatrace_pid" ]; then
  stop_fatrace
  scripts/check-packages.sh "$trace" || status=1
fi
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
