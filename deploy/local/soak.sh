#!/usr/bin/env bash
# Soak test of the local-cluster harness: `clusters up` / `clusters down` ROUNDS times
# (default 20) and check after each round that no process, port or folder is left.
#
# Usage: deploy/local/soak.sh [ROUNDS] [CLUSTERS]      (needs the repo's .venv)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-20}
N=${2:-2}
PY=${PY:-$ROOT/.venv/bin/python}
WORK=$(mktemp -u "${TMPDIR:-/tmp}/suanpan-soak-XXXXXX")
BIN=$(bash "$ROOT/deploy/local/build.sh")
cd "$ROOT"

leftovers() {  # $1: pids, $2: ports
  local bad=0 pid port
  for pid in $1; do
    if [ -e "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
      echo "soak: process $pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-80)) left" >&2; bad=1
    fi
  done
  for port in $2; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "soak: port $port still listening" >&2; bad=1
    fi
  done
  [ ! -e "$WORK" ] || { echo "soak: $WORK left behind" >&2; bad=1; }
  if pgrep -f "^$BIN/" >/dev/null; then
    echo "soak: processes from $BIN still running: $(pgrep -f "^$BIN/" | tr '\n' ' ')" >&2; bad=1
  fi
  return $bad
}

fail=0
for i in $(seq 1 "$ROUNDS"); do
  t0=$(date +%s.%N)
  "$PY" -m deploy.local.cli clusters up --clusters "$N" --workdir "$WORK" --bin-dir "$BIN" >/dev/null
  t1=$(date +%s.%N)
  read -r pids ports < <("$PY" - "$WORK/clusters.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
procs = [d["etcd"]["process"]] + [p for c in d["clusters"] for p in c["processes"]]
ports = list(d["etcd"]["ports"].values()) + [p for c in d["clusters"] for p in c["ports"].values()]
print(",".join(str(p["pid"]) for p in procs), ",".join(map(str, ports)))
PYEOF
)
  "$PY" -m deploy.local.cli clusters status --workdir "$WORK" >/dev/null || { echo "soak: round $i unhealthy" >&2; fail=1; }
  "$PY" -m deploy.local.cli clusters down --workdir "$WORK"
  t2=$(date +%s.%N)
  if ! leftovers "${pids//,/ }" "${ports//,/ }"; then fail=1; fi
  printf 'round %2d: up %.1f s, down %.1f s\n' "$i" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)"
  [ $fail -eq 0 ] || break
done
[ $fail -eq 0 ] && echo "soak: $ROUNDS rounds of $N clusters, nothing left behind" || { echo "soak: FAILED" >&2; exit 1; }
