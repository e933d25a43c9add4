#!/usr/bin/env bash
# Prepares the container test (test/container/): podman + runc from Debian, a
# containers.conf that works in this sandbox, and a local Node base image, since no
# image registry is reachable. Idempotent: installed packages and an existing base
# image are kept. Prints the base image name on its last line.
#
#   base=$(.ci/setup-podman.sh | tail -1)     # install + base image
#   CONTAINERS_CONF=$PWD/.tmp/podman/containers.conf podman build \
#     --build-arg NODE_IMAGE="$base" -t cronsafe .
#
# CONTAINERS_CONF must be an absolute path: podman build does not find a relative one.
# catatonit is the pause binary `podman kube play` needs (test/container/kube-play.test.ts).
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(podman buildah runc fuse-overlayfs uidmap slirp4netns debootstrap catatonit)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-podman: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# crun (podman's default) fails here on setrlimit under hybrid cgroups; runc works.
mkdir -p .tmp/podman
conf=.tmp/podman/containers.conf
cat >"$conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$PWD/$conf"

# The base image stands in for node:22-bookworm-slim: Debian bookworm (minbase) plus
# this machine's own Node (node, npm and headers). Named after the Node version, so a
# Node upgrade makes a new one.
node_version=$(node --version)
image="localhost/cronsafe-node-base:${node_version#v}"
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

root=$(mktemp -d /var/tmp/cronsafe-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
mirror=http://deb.debian.org/debian
echo "setup-podman: debootstrap bookworm into $root" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" >&2
# The Dockerfile's apt-get needs sources; the .debs debootstrap downloaded are not needed.
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" >"$root/etc/apt/sources.list"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*

# Node: the binary, npm and the headers (node-gyp builds the native modules against
# them offline), at the same prefix as on this machine.
prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
mkdir -p "$root$prefix"
tar -C "$prefix" -cf - bin/node lib/node_modules/npm include/node | tar -C "$root$prefix" -xf -
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root$prefix/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root$prefix/bin/npx"
# This machine's trust store and npm's global config (its `cafile`), so that npm and apt
# in the image reach the same registries through the same TLS setup as the host does.
mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
if [ -f "$prefix/etc/npmrc" ]; then mkdir -p "$root$prefix/etc" && cp "$prefix/etc/npmrc" "$root$prefix/etc/npmrc"; fi
chroot "$root" node --version >&2
chroot "$root" npm --version >&2

tar -C "$root" -c . | podman import --change 'CMD ["node"]' - "$image" >&2
echo "$image"
