#!/usr/bin/env bash
# Builds the Gateway API Inference Extension's lightweight endpoint picker (`cmd/lwepp` of the
# Go module sigs.k8s.io/gateway-api-inference-extension, at $INFERENCE_EXT_VERSION from
# scripts/kube_tools.env) into .cache/tools/lwepp-<version>/lwepp, for the side-by-side
# ext_proc benchmark (bench/ext_proc_bench.py --peer lwepp). The module comes from the Go
# module proxy; Go's caches live in .cache/tools/go/ as scripts/setup_kube.sh keeps them. A
# second run checks and returns at once. Not run by setup or CI (minutes of CPU cold).
# Usage: scripts/build_lwepp.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=kube_tools.env
. scripts/kube_tools.env

tools=$(pwd)/.cache/tools
dest="$tools/lwepp-$INFERENCE_EXT_VERSION"
if [ -x "$dest/lwepp" ]; then
  echo "build_lwepp: ok ($dest/lwepp)"
  exit 0
fi
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build_lwepp: no Go toolchain (set GO=/path/to/go)" >&2; exit 1; }
export GOMODCACHE="$tools/go/mod" GOCACHE="$tools/go/build" GOPATH="$tools/go/path"
export GOFLAGS="-p=2 -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$tools"

# Worktrees share .cache/tools through a symlink: one builder at a time.
exec 9>"$tools/.lock"
flock 9
[ -x "$dest/lwepp" ] && exit 0

# Into a scratch dir, renamed into place, so a stopped build leaves nothing that looks finished.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build_lwepp: building lwepp $INFERENCE_EXT_VERSION (minutes)"
GOBIN="$work/bin" "$GO" install -trimpath -ldflags "-s -w" \
  "sigs.k8s.io/gateway-api-inference-extension/cmd/lwepp@$INFERENCE_EXT_VERSION"
rm -rf "$dest"
mv "$work/bin" "$dest"
echo "build_lwepp: ok ($dest/lwepp)"
