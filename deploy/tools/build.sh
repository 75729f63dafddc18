#!/usr/bin/env bash
# Build one pinned Go tool (helm or promtool) from its module in deploy/tools/<tool>
# into .cache/tools/<tool>/<hash>/<tool>, <hash> = sha256 of the module files and
# this script.  A present binary under that hash is reused; anything else is built.
# A missing Go toolchain or module is an error, never a skip.
#
# Usage: build.sh helm|promtool    Env: GO (go binary).  Prints the binary's path.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOL=${1:-}
die() { echo "tools/build.sh: ERROR: $*" >&2; exit 1; }

case "$TOOL" in
  helm)
    PKG=helm.sh/helm/v3
    # helm's own Makefile stamps its version and the Kubernetes version its lint
    # and `template` assume (client-go's minor + 1.x, i.e. the Kubernetes release).
    ldflags() {
      local v k minor
      v=$(mod_version "$PKG"); k=$(mod_version k8s.io/client-go); minor=${k#v0.}; minor=${minor%%.*}
      echo "-s -w -X $PKG/internal/version.version=$v -X $PKG/internal/version.gitTreeState=clean" \
           "-X $PKG/pkg/lint/rules.k8sVersionMajor=1 -X $PKG/pkg/lint/rules.k8sVersionMinor=$minor" \
           "-X $PKG/pkg/chartutil.k8sVersionMajor=1 -X $PKG/pkg/chartutil.k8sVersionMinor=$minor"
    };;
  promtool)
    PKG=github.com/prometheus/prometheus
    ldflags() {
      local v; v=$(mod_version "$PKG"); v=${v#v0.}
      # Module v0.MMm.p is Prometheus 3.m.p (v0.316.0 = 3.16.0).
      v="3.$(( 10#${v%%.*} - 300 )).${v#*.}"
      echo "-s -w -X github.com/prometheus/common/version.Version=$v -X github.com/prometheus/common/version.Branch=HEAD"
    };;
  *) die "usage: build.sh helm|promtool";;
esac

SRC=$ROOT/deploy/tools/$TOOL
INPUTS=("$SRC/go.mod" "$SRC/go.sum" "$0")
for f in "${INPUTS[@]}"; do [ -f "$f" ] || die "missing input $f"; done
HASH=$(cat "${INPUTS[@]}" | sha256sum | cut -c1-16)
OUT=$ROOT/.cache/tools/$TOOL/$HASH
if [ -x "$OUT/$TOOL" ]; then echo "$OUT/$TOOL"; exit 0; fi

GO=${GO:-$(command -v go || true)}
[ -n "$GO" ] || GO=/usr/local/go/bin/go
[ -x "$GO" ] || die "Go toolchain not found (looked on PATH and /usr/local/go/bin/go; set GO=/path/to/go)"
case "$("$GO" env GOVERSION)" in
  go1.26.*) ;;
  *) die "need Go 1.26.x, found $("$GO" env GOVERSION)";;
esac
export GOTOOLCHAIN=local GOTELEMETRY=off CGO_ENABLED=0 GOFLAGS=-mod=readonly
export GOCACHE=$ROOT/.cache/go-build GOMODCACHE=$ROOT/.cache/go-mod
mod_version() { (cd "$SRC" && "$GO" list -m -f '{{.Version}}' "$1"); }
mkdir -p "$GOCACHE" "$GOMODCACHE" "$(dirname "$OUT")"

exec 9>"$(dirname "$OUT")/.build.lock"
flock 9
if [ -x "$OUT/$TOOL" ]; then echo "$OUT/$TOOL"; exit 0; fi
TMP=$(mktemp -d "$(dirname "$OUT")/.bin.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$(date +%s)
echo "tools/build.sh: building $TOOL into $OUT (cold: minutes)" >&2
FLAGS=$(ldflags) || die "could not read the module versions of $TOOL"
(cd "$SRC" && "$GO" build -trimpath -ldflags "$FLAGS" -o "$TMP/$TOOL" tool >&2) \
  || die "go build of $TOOL failed"
[ -x "$TMP/$TOOL" ] || die "build produced no $TOOL"
chmod 755 "$TMP"
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "tools/build.sh: built $TOOL in $(( $(date +%s) - start )) s" >&2
echo "$OUT/$TOOL"
