#!/usr/bin/env bash
# Fails when the build or the tests read a file of a Debian package that
# is neither in this machine image's package list nor installed by
# scripts/deps.sh: such a package was installed by hand, and the README's
# commands would fail on a fresh machine (as libprotobuf-dev once did).
#   scripts/check-packages.sh TRACE   (a `fatrace -f O` log: "comm(pid): O /path")
set -euo pipefail
cd "$(dirname "$0")/.."
trace=$1
image=${SKIFF_IMAGE_PACKAGES:-/usr/share/package-lists/installed-rust.txt}
if [ ! -f "$image" ]; then
  echo "check-packages: no image package list at $image; skipped" >&2
  exit 0
fi

# Packages the project installs itself: the names in deps.sh's list.
ours=$(sed -n '/^packages=(/,/^)/p' scripts/deps.sh | sed 's/#.*//' | tr -s ' ()' '\n' | grep -v '^packages=' | grep -v '^$' || true)
# ... and what they depend on (installed with them), from dpkg's records.
closure() {
  local todo=("$@") seen=" " p deps
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}; todo=("${todo[@]:1}")
    case "$seen" in *" $p "*) continue ;; esac
    seen="$seen$p "
    echo "$p"
    deps=$(dpkg-query -W -f='${Pre-Depends}, ${Depends}' "$p" 2>/dev/null \
      | tr ',|' '\n\n' | sed -E 's/\(.*\)//; s/:any//; s/^ +//; s/ +$//' | grep -v '^$' || true)
    for d in $deps; do todo+=("$d"); done
  done
}
known=$( { awk -F'\t' '$1=="apt"{sub(/:.*/,"",$2); print $2}' "$image"; closure $ours; } | sed 's/:.*//' | sort -u)

# System files the traced processes opened or ran.
files=$(sed -nE 's#^.*\([0-9]+\): [A-Z+<>]+ +(/(usr|lib|lib64|bin|sbin|etc|opt)/.*)$#\1#p' "$trace" \
  | grep -v '^/usr/local/' | sort -u || true)
[ -n "$files" ] || { echo "check-packages: no system files in the trace" >&2; exit 0; }

# Which packages own each regular file (dpkg -S takes many paths and
# answers "pkg1, pkg2:arch: path"; unowned ones are skipped). Merged /usr:
# a file may be registered under /lib or /usr/lib. A file is fine when any
# of its owners is known.
files=$(printf '%s\n' "$files" | while read -r f; do if [ -f "$f" ]; then echo "$f"; fi; done \
  | sed -E 'p; s#^/(lib|lib64|bin|sbin)/#/usr/\1/#; t; s#^/usr/(lib|lib64|bin|sbin)/#/\1/#' | sort -u)
missing=$(printf '%s\n' "$files" | { xargs -r dpkg -S 2>/dev/null || true; } | awk -v known="$known" '
  BEGIN { n = split(known, k, "\n"); for (i = 1; i <= n; i++) ok[k[i]] = 1 }
  # dpkg-divert records ("diversion by dash from: /bin/sh") name no owner.
  /^diversion by / { next }
  {
    at = index($0, ": "); if (at == 0) next
    owners = substr($0, 1, at - 1); file = substr($0, at + 2)
    m = split(owners, o, ", "); good = 0
    for (i = 1; i <= m; i++) { p = o[i]; sub(/:.*/, "", p); if (p in ok) good = 1 }
    if (!good) { sub(/:[^,]*/, "", owners); bad[owners] = file }
  }
  END { for (p in bad) print p " (" bad[p] ")" }' | sort)
if [ -n "$missing" ]; then
  echo "check-packages: the build or tests read files of packages that neither the image nor scripts/deps.sh installs:" >&2
  printf '%s\n' "$missing" | sed 's/^/  /' >&2
  echo "add them to scripts/deps.sh" >&2
  exit 1
fi
echo "check-packages: $(printf '%s\n' "$files" | wc -l) system files read, every package is in the image or scripts/deps.sh" >&2
