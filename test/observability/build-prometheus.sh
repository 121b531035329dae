#!/usr/bin/env bash
# Builds Prometheus v3.5.0 (the version the rlmesh-observability chart runs) from
# the Go module proxy into ~/.cache/rlmesh-testbin/prometheus-v3.5.0/bin, once.
# With the argument promtool, builds that instead (the same module and version;
# the tests run `promtool test rules` on the runtime chart's PrometheusRule).
# Upstream's cmd/prometheus/main.go unchanged, except that only the Kubernetes,
# file and HTTP service discoveries are linked in (the other twenty cloud SDKs
# would triple the build; the chart uses Kubernetes SD only). Debian's package
# is built without Kubernetes SD, so the tests that discover pods need this one.
# promtool's cmd/promtool is likewise unchanged but for the same plugins lines.
# Prints the binary's path.
#
# Each tool is built from the go.mod and go.sum committed in
# test/observability/go/<tool>, with -mod=readonly: a module whose content
# differs from its go.sum line fails the build with Go's "checksum mismatch"
# naming it. A cached binary counts only if it was built from exactly those two
# files. After changing the version, record its modules:
#
#   PROMETHEUS_VERSION=vX.Y.Z bash test/observability/build-prometheus.sh --go-mod update [prometheus|promtool]
#   bash test/observability/build-prometheus.sh --go-mod check [prometheus|promtool]
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v3.5.0}"
GO_MOD_MODE=""
if [ "${1:-}" = --go-mod ]; then GO_MOD_MODE="${2:-}"; shift 2 || true; fi
TOOL="${1:-prometheus}"
case "$TOOL" in prometheus|promtool) ;; *) echo "usage: $0 [--go-mod update|check] [prometheus|promtool]" >&2; exit 2;; esac
# Prometheus tags its Go module v0.<major><minor 2 digits>.<patch>: v3.5.0 -> v0.305.0
IFS=. read -r major minor patch <<<"${PROMETHEUS_VERSION#v}"
MODULE_VERSION=$(printf 'v0.%d%02d.%d' "$major" "$minor" "$patch")
CACHE="${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/prometheus-$PROMETHEUS_VERSION"
BIN="$CACHE/bin/$TOOL"
PIN="$(cd "$(dirname "$0")" && pwd)/go/$TOOL"
# prometheus keeps the stamp name it always had, so existing caches stay valid
STAMP="$CACHE/bin/.stamp"; [ "$TOOL" = prometheus ] || STAMP="$CACHE/bin/.stamp-$TOOL"
# each tool is a module of its own (src/, src-promtool/): promtool's imports do not move the
# versions the prometheus image is built with
src="$CACHE/src"; [ "$TOOL" = prometheus ] || src="$CACHE/src-$TOOL"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
fail() { printf '[build] error: %s\n' "$*" >&2; exit 1; }

# Writes the tool's sources into the current folder from the module's source folder $1.
write_sources() {
  local dir=$1 f
  # minimum.go is package plugins in a file of its own: link it through a tiny package
  mkdir -p plugins/minimum && sed 's/^package plugins$/package minimum/' "$dir/plugins/minimum.go" > plugins/minimum/minimum.go
  if [ "$TOOL" = prometheus ]; then
    cp "$dir/cmd/prometheus/main.go" main.go && chmod 644 main.go
    grep -q '_ "github.com/prometheus/prometheus/plugins"' main.go
    sed -i 's#_ "github.com/prometheus/prometheus/plugins".*#_ "github.com/prometheus/prometheus/discovery/kubernetes"\n\t_ "github.com/prometheus/prometheus/plugins/minimum"#' main.go
    sed -i 's#"github.com/prometheus/prometheus/plugins/minimum"#"rlmesh-testbin/prometheus/plugins/minimum"#' main.go
  else
    # cmd/promtool without its tests; it imports Kubernetes SD itself
    for f in "$dir"/cmd/promtool/*.go; do case "$f" in *_test.go) ;; *) cp "$f" . ;; esac; done
    chmod 644 ./*.go
    grep -q '_ "github.com/prometheus/prometheus/plugins"' main.go
    sed -i 's#_ "github.com/prometheus/prometheus/plugins".*#_ "rlmesh-testbin/prometheus/plugins/minimum"#' ./*.go
  fi
}

module_dir() { go mod download -json "github.com/prometheus/prometheus@$MODULE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

# Writes into $1 the tool's sources and a go.mod and go.sum resolved from the Go module proxy
# (go mod tidy checks each module against sum.golang.org).
resolve_modules() {
  cd "$1"
  local dir goline
  dir=$(module_dir)
  write_sources "$dir"
  goline=$(grep -m1 '^go ' "$dir/go.mod")
  {
    printf 'module rlmesh-testbin/prometheus\n\n%s\n\nrequire github.com/prometheus/prometheus %s\n\n' "$goline" "$MODULE_VERSION"
    # upstream's own pin (a dependency's replace directives do not apply to this module)
    grep '^replace ' "$dir/go.mod" || true
  } > go.mod
  go mod tidy >&2
}

if [ -n "$GO_MOD_MODE" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  echo "[build] resolving the modules of $TOOL $PROMETHEUS_VERSION ($MODULE_VERSION)" >&2
  ( resolve_modules "$tmp" )
  case "$GO_MOD_MODE" in
    update)
      mkdir -p "$PIN" && cp "$tmp/go.mod" "$tmp/go.sum" "$PIN/"
      echo "[build] wrote $PIN/go.mod and go.sum for $TOOL $PROMETHEUS_VERSION: review the diff and commit it" >&2 ;;
    check)
      diff -u "$PIN/go.mod" "$tmp/go.mod" >&2 && diff -u "$PIN/go.sum" "$tmp/go.sum" >&2 ||
        fail "$PIN/go.mod or go.sum differs (above) from what $TOOL $PROMETHEUS_VERSION resolves to from the Go module proxy; if the change is expected, run: PROMETHEUS_VERSION=$PROMETHEUS_VERSION bash $0 --go-mod update $TOOL, and commit the result"
      echo "[build] $PIN: go.mod and go.sum are what $TOOL $PROMETHEUS_VERSION resolves to" >&2 ;;
    *) fail "usage: $0 --go-mod update|check [prometheus|promtool]" ;;
  esac
  exit 0
fi

pinned() { cmp -s "$PIN/go.mod" "$src/go.mod" && cmp -s "$PIN/go.sum" "$src/go.sum"; }
if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$MODULE_VERSION" ] && pinned; then
  echo "$BIN"; exit 0
fi
pinned_version=$(sed -nE 's#^(require)?[[:space:]]+github\.com/prometheus/prometheus (v[^ ]+)$#\2#p' "$PIN/go.mod")
[ "$pinned_version" = "$MODULE_VERSION" ] ||
  fail "PROMETHEUS_VERSION is $PROMETHEUS_VERSION ($MODULE_VERSION) but $PIN/go.mod requires github.com/prometheus/prometheus ${pinned_version:-(none)}; record the modules of $PROMETHEUS_VERSION first: PROMETHEUS_VERSION=$PROMETHEUS_VERSION bash $0 --go-mod update $TOOL, review the diff and commit it"
echo "[build] $TOOL $PROMETHEUS_VERSION ($MODULE_VERSION) from the Go module proxy, modules pinned by $PIN/go.sum" >&2
rm -rf "$src"; mkdir -p "$src" "$CACHE/bin"; cd "$src"
# the module's own source is checked against the committed go.sum too (downloaded inside the module)
cp "$PIN/go.mod" "$PIN/go.sum" .
dir=$(module_dir)
write_sources "$dir"
nice -n 10 go build -mod=readonly -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v} -X github.com/prometheus/common/version.Branch=rlmesh-testbin" -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"
echo "$MODULE_VERSION" > "$STAMP"
echo "$BIN"
