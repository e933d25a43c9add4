#!/usr/bin/env bash
# Debian packages the tests use as real parts: faketime (accelerated clock for the daemon
# and overrun process tests), fuse-overlayfs (a real FUSE mount for the network file
# system refusal test), gcc and the C library's headers (the disk quota shim of
# output-disk-quota.test.ts, built at test time). Idempotent and quiet; a no-op when everything is present.
set -euo pipefail
need=()
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || [ -e /usr/lib/faketime/libfaketime.so.1 ] || need+=(faketime)
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
command -v gcc >/dev/null || need+=(gcc)
[ -e /usr/include/stdio.h ] || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "== apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
