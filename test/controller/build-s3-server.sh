#!/usr/bin/env bash
# Builds versitygw (an S3-compatible gateway with a POSIX backend) from its Go
# module, for the controller's cache-fill tests. Cached under
# ~/.cache/rlmesh-testbin/ so it is built once per machine. Prints the binary path.
set -euo pipefail
VERSION="${VERSITYGW_VERSION:-v1.8.0}"
BIN_DIR="${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}"
BIN="$BIN_DIR/versitygw"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN_DIR"
echo "[s3] building versitygw@$VERSION from the Go module proxy (a few minutes the first time)" >&2
GOBIN="$BIN_DIR" CGO_ENABLED=0 go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
echo "$BIN"
