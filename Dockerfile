# cronsafe container image.
#
#   docker build -t cronsafe .                      # node:22 (LTS) on Debian bookworm, by digest
#   docker build --build-arg NODE_IMAGE=... .        # any Debian-based image with node + npm
#
# The runtime image runs as a numeric non-root user, writes nothing outside mounted
# volumes and /tmp (so `readOnlyRootFilesystem: true` works), and has tini as PID 1.
# Handlers (`handler.command`) run inside this image: build your own image FROM this one
# to add the tools they need (see docs/kubernetes.md).

# The Node 22 LTS line on bookworm (better-sqlite3 12 supports Node 20 and 22), pinned by
# the digest of its multi-platform index, so a rebuild of the same commit gets the same
# base; Renovate (.github/renovate.json) proposes new digests.
ARG NODE_IMAGE=node:22-bookworm-slim@sha256:f32b81066cde10a75dbac96646099533316d94bac4150c55da1636e1f0ffdc46

# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build

# node-gyp builds better-sqlite3 and fs-ext from source: it needs python3, make and g++.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*

# Built where it runs (/app, as in the runtime stage): V8's code cache, made by the build,
# keeps the path the program was compiled under, and stack traces show it.
WORKDIR /app
COPY package.json package-lock.json ./

# Install scripts are skipped for every package and the two native modules are then
# built by name: no other dependency's install script runs in the build, and the build
# does not depend on npm's allowScripts policy (npm 11 warns about install scripts that
# package.json does not allow-list; later versions are to block them).
# node-gyp is pointed at the headers that ship next to the node binary (official images
# and Debian's nodejs both have them), so the build needs no download of Node headers.
# --omit=peer: the only peer-only packages are aws-cdk-lib and constructs (~170 MB),
# pulled in by the test-only kubectl/helm package; building needs neither.
RUN prefix="$(node -p 'require("path").resolve(process.execPath, "../..")')" \
 && if [ -f "$prefix/include/node/node.h" ]; then export npm_config_nodedir="$prefix"; fi \
 && npm ci --omit=peer --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 fs-ext \
 && node -e 'require("better-sqlite3")(":memory:"); require("fs-ext")'

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/bundle.mjs ./scripts/bundle.mjs
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && chmod 0755 dist/cli.cjs dist/cli.js

# The native modules need only their .node files at run time; their C sources and
# object files (~25 MB, mostly SQLite's amalgamation) stay out of the image.
RUN for m in better-sqlite3 fs-ext; do \
      find "node_modules/$m/build" -mindepth 1 -maxdepth 1 ! -name Release -exec rm -rf {} + ; \
      find "node_modules/$m/build/Release" -mindepth 1 -maxdepth 1 ! -name '*.node' -exec rm -rf {} + ; \
    done \
 && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
      node_modules/better-sqlite3/build/Release/test_extension.node \
 && node -e 'require("better-sqlite3")(":memory:").prepare("select 1").get(); require("fs-ext")'

# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime

# tini as PID 1: reaps orphaned grandchildren of command handlers (a handler that
# forks and exits would otherwise leave zombies) and forwards SIGTERM to cronsafe, which
# drains. Not `tini -g`: cronsafe decides when handlers' process groups get SIGTERM.
# apt's package caches (*.bin, ~75 MB) go too: official Debian images never write them,
# a debootstrapped base does.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# `cronsafe status` etc. from `kubectl exec` or a debug Job (cli.cjs, the bin, has a node shebang).
# A passwd and group entry for the image's user (distroless's "nonroot"): containerd adds
# none for a pod's uid, and handlers that look their user up (whoami, ssh, git's ident,
# Python's getpass, Node's os.userInfo()) failed without one. Home is /tmp, as HOME says.
RUN ln -s /app/dist/cli.cjs /usr/local/bin/cronsafe \
 && echo 'nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group

# HOME=/tmp: the root filesystem may be read-only, and a pod may run as a uid without a
# passwd entry (runAsUser other than 65532); anything (a handler, npm) that writes under
# $HOME lands on the /tmp volume instead.
ENV NODE_ENV=production \
    HOME=/tmp \
    CRONSAFE_CONFIG=/etc/cronsafe/cronsafe.yaml

# 65532 is the conventional "nonroot" uid/gid (distroless); numeric so that
# `runAsNonRoot: true` can verify it without a passwd lookup.
USER 65532:65532

# The same node flags as the bin's shebang (src/cli.ts says what each does); they keep RSS
# flat on long runs (docs/benchmarks.md). dist/cli.cjs, the bin: a CommonJS entry starts
# without Node's ES module loader (dist/cli.js requires it, for `node dist/cli.js`).
ENTRYPOINT ["tini", "--", "node", "--v8-pool-size=1", "--heap-growing-percent=10", "--max-semi-space-size=2", "/app/dist/cli.cjs"]
CMD ["run"]
