#!/usr/bin/env bash
# Keeps the better-sqlite3 addon that npm ci built, in the cache prebuild-install reads.
#
# better-sqlite3's install script is `prebuild-install || node-gyp rebuild`: prebuild-install
# first looks in npm's cache (<cache>/_prebuilds/, one file per download URL, which names
# the package version, the Node ABI, the platform and the architecture), then on GitHub,
# which is out of reach here; so every npm ci compiled SQLite (about 70 s of one core, most
# of npm ci). After a build, this puts the addon there, packed as prebuild-install unpacks
# it, so the next npm ci on this machine unpacks it instead; another version or Node ABI
# is another file, and a machine without it builds from source as before.
# Idempotent: a no-op when the file is there. Run after npm ci.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=node_modules/better-sqlite3
addon=build/Release/better_sqlite3.node
[ -f "$pkg/$addon" ] || exit 0
cache=$(npm_config_cache="$(npm config get cache)" node -e '
  const util = require("./node_modules/prebuild-install/util.js");
  const pkg = require("./node_modules/better-sqlite3/package.json");
  const rc = require("./node_modules/prebuild-install/rc.js")(pkg);
  console.log(util.cachedPrebuild(util.getDownloadUrl({ ...rc, pkg })));
')
[ -f "$cache" ] && exit 0
# Only an addon that loads and answers a query is kept.
node -e 'require("./node_modules/better-sqlite3")(":memory:").prepare("SELECT 1").get()'
mkdir -p "$(dirname "$cache")"
# Packed beside the cache file and renamed over it: a run killed half-way leaves no
# truncated file where prebuild-install looks.
tmp=$(mktemp "$cache.XXXXXX")
trap 'rm -f "$tmp"' EXIT
tar -czf "$tmp" -C "$pkg" "$addon"
mv -f "$tmp" "$cache"
echo "kept $pkg/$addon as $cache"
