# cronsafe container image.
#
#   docker build -t cronsafe .                      # node:22 (LTS) on Debian bookworm
#   docker build --build-arg NODE_IMAGE=... .        # any Debian-based image with node + npm
#
# The runtime image runs as a numeric non-root user, writes nothing outside mounted
# volumes and /tmp (so `readOnlyRootFilesystem: true` works), and has tini as PID 1.
# Handlers (`handler.command`) run inside this image: build your own image FROM this one
# to add the tools they need (see docs/kubernetes.md).

# Pinned to the Node 22 LTS line on bookworm (better-sqlite3 12 supports Node 20 and 22).
# Pin a digest (node:22-bookworm-slim@sha256:...) in your own builds for reproducibility.
ARG NODE_IMAGE=node:22-bookworm-slim

# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build

# node-gyp builds better-sqlite3 and fs-ext from source: it needs python3, make and g++.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY package.json package-lock.json ./

# Install scripts are skipped for every package and the two native modules are then
# built by name: npm >= 11.x blocks dependency install scripts unless package.json
# allow-lists them, while older npm runs all of them; naming them works on both, and no
# other dependency's install script runs in the build.
# node-gyp is pointed at the headers that ship next to the node binary (official images
# and Debian's nodejs both have them), so the build needs no download of Node headers.
RUN prefix="$(node -p 'require("path").resolve(process.execPath, "../..")')" \
 && if [ -f "$prefix/include/node/node.h" ]; then export npm_config_nodedir="$prefix"; fi \
 && npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 fs-ext \
 && node -e 'require("better-sqlite3")(":memory:"); require("fs-ext")'

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && chmod 0755 dist/cli.js

# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime

# tini as PID 1: reaps orphaned grandchildren of command handlers (a handler that
# forks and exits would otherwise leave zombies) and forwards SIGTERM to cronsafe, which
# drains. Not `tini -g`: cronsafe decides when handlers' process groups get SIGTERM.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# `cronsafe status` etc. from `kubectl exec` or a debug Job (cli.js has a node shebang).
RUN ln -s /app/dist/cli.js /usr/local/bin/cronsafe

# HOME=/tmp: the user has no passwd entry and the root filesystem may be read-only;
# anything (a handler, npm) that writes under $HOME lands on the /tmp volume instead.
ENV NODE_ENV=production \
    HOME=/tmp \
    CRONSAFE_CONFIG=/etc/cronsafe/cronsafe.yaml

# 65532 is the conventional "nonroot" uid/gid (distroless); numeric so that
# `runAsNonRoot: true` can verify it without a passwd lookup.
USER 65532:65532

ENTRYPOINT ["tini", "--", "node", "/app/dist/cli.js"]
CMD ["run"]
