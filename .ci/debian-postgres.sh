#!/usr/bin/env bash
# Start (or stop) Debian's PostgreSQL server in a throw-away folder, for the store tests run with
# DATABASE_URL. Installs the package when the machine lacks it. Prints the URL on start; on stop,
# what the server logged of deadlocks (to stderr).
set -euo pipefail
dir=${PGTEST_DIR:-/tmp/suanpan-debian-pg}
port=${PGTEST_PORT:-54329}
case "${1:-start}" in
start)
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$bin" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  rm -rf "$dir" && mkdir -p "$dir" && chown postgres "$dir"
  runuser -u postgres -- "$bin/initdb" -D "$dir/data" --auth=trust -U postgres >/dev/null
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
  echo "postgresql://postgres@127.0.0.1:$port/postgres"
  ;;
stop)
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null || true
  # the server's account of collisions (which statements deadlocked) outlives the folder
  grep -A 12 "deadlock detected" "$dir/log" 2>/dev/null | head -200 >&2 || true
  rm -rf "$dir"
  ;;
esac
