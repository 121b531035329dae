#!/usr/bin/env bash
# Builds versitygw (an S3-compatible gateway with a POSIX backend) from its Go
# module, for the cache-fill tests and the in-cluster S3 image. Cached under
# ~/.cache/rlmesh-testbin/ so it is built once per machine. Prints the binary path.
set -euo pipefail
VERSION="${VERSITYGW_VERSION:-v1.8.0}"
exec "$(dirname "$0")/../support/go-tool.sh" "${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}" versitygw "github.com/versity/versitygw/cmd/versitygw@$VERSION"
