#!/usr/bin/env bash
# Start a throwaway PostgreSQL in DIR on loopback PORT and print its URL; or stop it.
#   .ci/start-postgres.sh start DIR PORT [NAME=VALUE ...]   -> postgres://postgres@127.0.0.1:PORT/postgres
#   .ci/start-postgres.sh stop DIR
# Trust auth, fsync off: for tests and benchmarks only. Settings given after PORT are passed
# as `-c NAME=VALUE` after the defaults and win over them (e.g. `fsync=on` for a bench that
# must pay for durable commits). initdb refuses to run as root, so
# as root the directory is given to the `postgres` user and the binaries run as it (so its
# parent directories must be searchable by that user, e.g. a fresh `mktemp -d` under /tmp).
set -euo pipefail
cmd=${1:?usage: start-postgres.sh start DIR PORT | stop DIR}
dir=${2:?DIR required}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "no PostgreSQL under /usr/lib/postgresql (run .ci/setup-postgres.sh)" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi
}
case "$cmd" in
  start)
    port=${3:?PORT required}
    extra=''
    for kv in "${@:4}"; do
      [[ "$kv" =~ ^[a-z_.]+=[A-Za-z0-9_.,:-]*$ ]] || { echo "bad setting $kv (want name=value)" >&2; exit 2; }
      extra="$extra -c $kv"
    done
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "'$bin/initdb' -D '$dir/data' -U postgres -A trust -E UTF8 --locale=C --no-sync" >/dev/null
    as_pg "'$bin/pg_ctl' -D '$dir/data' -l '$dir/log' -w -t 30 \
      -o '-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200$extra' start" >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    as_pg "'$bin/pg_ctl' -D '$dir/data' -m fast -w -t 10 stop" >/dev/null 2>&1 || {
      pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    }
    rm -rf "$dir"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
