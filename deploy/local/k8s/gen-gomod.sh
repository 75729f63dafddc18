#!/usr/bin/env bash
# Regenerate deploy/local/k8s/go.mod (+ kwok/go.mod) for a Kubernetes release.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging
# module (k8s.io/api, k8s.io/client-go, ...) with ./staging/... .  We re-pin each
# of those to its published v0.<minor>.<patch> tag instead, read from the
# release's own go.mod so the list stays right for other versions.
#
# Usage: deploy/local/k8s/gen-gomod.sh [K8S_VERSION]   (default 1.36.2)
set -euo pipefail
V=${1:-1.36.2}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "gen-gomod: Go toolchain not found (set GO=...)" >&2; exit 1; }
export GOTOOLCHAIN=local GOTELEMETRY=off GOFLAGS=-mod=mod
export GOMODCACHE=${GOMODCACHE:-$ROOT/.cache/go-mod} GOCACHE=${GOCACHE:-$ROOT/.cache/go-build}

cd "$HERE"
rm -f go.mod go.sum
"$GO" mod init suanpan.local/deploy/k8s
"$GO" mod edit -go=1.26.0
GOMOD=$("$GO" mod download -json "k8s.io/kubernetes@v$V" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$GOMOD"); do
  "$GO" mod edit "-replace=$m=$m@v0.${V#1.}"
done
"$GO" mod edit "-require=k8s.io/kubernetes@v$V"
"$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
"$GO" get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$V" "k8s.io/kubernetes/cmd/kube-scheduler@v$V" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@v$V" "k8s.io/kubernetes/cmd/kubectl@v$V"
"$GO" mod tidy

# kwok lives in its own module: its k8s.io/* requirements must not meet the replaces above.
cd "$HERE/kwok"
rm -f go.mod go.sum
"$GO" mod init suanpan.local/deploy/k8s/kwok
"$GO" mod edit -go=1.26.0
"$GO" get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
"$GO" mod tidy
echo "gen-gomod: pinned k8s.io/kubernetes v$V, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
