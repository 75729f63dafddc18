#!/usr/bin/env bash
# Build the local-cluster binaries (kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kwok, etcd) from the pinned Go modules in
# deploy/local/k8s into .cache/k8s/v$K8S_VERSION/bin.
#
# Warm cache (all binaries present and the stamp equals the hash of the
# module files and sources) => nothing is rebuilt.  A missing Go toolchain or
# module is an error, never a skip.
#
# Env: GO (go binary), K8S_VERSION (default 1.36.2, must match go.mod),
#      SUANPAN_K8S_BIN (override output dir).  Prints the bin dir on stdout.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/deploy/local/k8s
K8S_VERSION=${K8S_VERSION:-1.36.2}
BIN=${SUANPAN_K8S_BIN:-$ROOT/.cache/k8s/v$K8S_VERSION/bin}
BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl kwok etcd)
INPUTS=("$SRC/go.mod" "$SRC/go.sum" "$SRC/etcd/main.go" "$SRC/kwok/go.mod" "$SRC/kwok/go.sum" "$0")

die() { echo "build.sh: ERROR: $*" >&2; exit 1; }

for f in "${INPUTS[@]}"; do [ -f "$f" ] || die "missing input $f"; done
grep -q "k8s.io/kubernetes v$K8S_VERSION" "$SRC/go.mod" \
  || die "deploy/local/k8s/go.mod is not pinned to k8s.io/kubernetes v$K8S_VERSION (run gen-gomod.sh $K8S_VERSION)"
STAMP_WANT=$(cat "${INPUTS[@]}" | sha256sum | cut -d' ' -f1)

fresh() {
  [ "$(cat "$BIN/.stamp" 2>/dev/null)" = "$STAMP_WANT" ] || return 1
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}
if fresh; then echo "$BIN"; exit 0; fi

GO=${GO:-$(command -v go || true)}
[ -n "$GO" ] || GO=/usr/local/go/bin/go
[ -x "$GO" ] || die "Go toolchain not found (looked on PATH and /usr/local/go/bin/go; set GO=/path/to/go)"
GOVER=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed"
case "$GOVER" in
  go1.26|go1.26.*) ;;
  *) die "need Go 1.26.x for Kubernetes $K8S_VERSION, found $GOVER (Go >= 1.27 breaks the apiserver's OpenAPI)";;
esac

export GOTOOLCHAIN=local GOTELEMETRY=off CGO_ENABLED=0 GOFLAGS=-mod=readonly
export GOCACHE=$ROOT/.cache/go-build GOMODCACHE=$ROOT/.cache/go-mod
mkdir -p "$GOCACHE" "$GOMODCACHE" "$(dirname "$BIN")"

# One build at a time (pytest sessions and humans may race).
exec 9>"$(dirname "$BIN")/.build.lock"
flock 9
if fresh; then echo "$BIN"; exit 0; fi

TMP=$(mktemp -d "$(dirname "$BIN")/.bin.XXXXXX")
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
start=$(date +%s)
LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
echo "build.sh: building Kubernetes v$K8S_VERSION binaries + etcd into $BIN (cold: ~7 min)" >&2
(cd "$SRC" && "$GO" build -trimpath -tags=notest,grpcnotrace -ldflags "$LDFLAGS" -o "$TMP/" tool ./etcd >&2) \
  || die "go build of k8s.io/kubernetes commands / etcd failed"
(cd "$SRC/kwok" && "$GO" build -trimpath -ldflags "-s -w" -o "$TMP/" tool >&2) \
  || die "go build of kwok failed"
for b in "${BINARIES[@]}"; do [ -x "$TMP/$b" ] || die "build produced no $b"; done
rm -rf "$BIN"
mv "$TMP" "$BIN"
trap - EXIT
echo "$STAMP_WANT" > "$BIN/.stamp"
echo "build.sh: built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
