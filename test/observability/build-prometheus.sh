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
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v3.5.0}"
TOOL="${1:-prometheus}"
case "$TOOL" in prometheus|promtool) ;; *) echo "usage: $0 [prometheus|promtool]" >&2; exit 2;; esac
# Prometheus tags its Go module v0.<major><minor 2 digits>.<patch>: v3.5.0 -> v0.305.0
IFS=. read -r major minor patch <<<"${PROMETHEUS_VERSION#v}"
MODULE_VERSION=$(printf 'v0.%d%02d.%d' "$major" "$minor" "$patch")
CACHE="${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/prometheus-$PROMETHEUS_VERSION"
BIN="$CACHE/bin/$TOOL"
# prometheus keeps the stamp name it always had, so existing caches stay valid
STAMP="$CACHE/bin/.stamp"; [ "$TOOL" = prometheus ] || STAMP="$CACHE/bin/.stamp-$TOOL"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$MODULE_VERSION" ]; then
  echo "$BIN"; exit 0
fi
echo "[build] $TOOL $PROMETHEUS_VERSION ($MODULE_VERSION) from the Go module proxy" >&2
# each tool is a module of its own (src/, src-promtool/): promtool's imports do not move the
# versions the prometheus image is built with
src="$CACHE/src"; [ "$TOOL" = prometheus ] || src="$CACHE/src-$TOOL"
rm -rf "$src"; mkdir -p "$src" "$CACHE/bin"; cd "$src"
dir=$(go mod download -json "github.com/prometheus/prometheus@$MODULE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
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
goline=$(grep -m1 '^go ' "$dir/go.mod")
{
  printf 'module rlmesh-testbin/prometheus\n\n%s\n\nrequire github.com/prometheus/prometheus %s\n\n' "$goline" "$MODULE_VERSION"
  # upstream's own pin (a dependency's replace directives do not apply to this module)
  grep '^replace ' "$dir/go.mod" || true
} > go.mod
go mod tidy >&2
nice -n 10 go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v} -X github.com/prometheus/common/version.Branch=rlmesh-testbin" -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"
echo "$MODULE_VERSION" > "$STAMP"
echo "$BIN"
