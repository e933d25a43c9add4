#!/usr/bin/env bash
# Debian's Prometheus tools for the metrics tests: promtool (check/test rules), a real
# Pushgateway and a real Prometheus (started on loopback by the tests themselves, on free
# ports, and stopped by pid). Idempotent and quiet; a no-op when everything is present.
# The packages enable systemd units; in a container without systemd nothing is started.
set -euo pipefail
need=()
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || need+=(prometheus-pushgateway)
if [ ${#need[@]} -gt 0 ]; then
  echo "== apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
