#!/usr/bin/env bash
# Builds Stripe's smokescreen (the egress proxy a platform engineer would pick
# for this job) from its Go module, for test/bench/egress.ts. Cached under
# ~/.cache/rlmesh-testbin/; prints the binary path. Benchmarks only.
set -euo pipefail
VERSION="${SMOKESCREEN_VERSION:-v0.1.0}"
BIN_DIR="${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/smokescreen-$VERSION"
BIN="$BIN_DIR/smokescreen"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN_DIR"
echo "[bench] building smokescreen@$VERSION from the Go module proxy" >&2
GOBIN="$BIN_DIR" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "github.com/stripe/smokescreen@$VERSION" >&2
echo "$BIN"
