#!/usr/bin/env bash
# Builds a test-only Go tool from the Go module proxy into BIN_DIR, once per
# machine (the binary there is reused), and prints its path.
#   test/support/go-tool.sh BIN_DIR NAME MODULE_PATH@VERSION
set -euo pipefail
BIN_DIR="$1" NAME="$2" MODULE="$3"
BIN="$BIN_DIR/$NAME"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN_DIR"
echo "[go-tool] building $MODULE from the Go module proxy (a few minutes the first time)" >&2
GOBIN="$BIN_DIR" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "$MODULE" >&2
echo "$BIN"
