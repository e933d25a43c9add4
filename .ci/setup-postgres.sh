#!/usr/bin/env bash
# Debian's PostgreSQL for the ledger tests and the bench (tests start their own throwaway
# servers with initdb + pg_ctl on free loopback ports, and stop them by pid). Idempotent
# and quiet; a no-op when a server binary is present. The package's cluster and systemd
# unit are not used (in a container without systemd nothing is started).
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== apt-get install postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1
