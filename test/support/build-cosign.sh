#!/usr/bin/env bash
# Builds Sigstore's cosign from its Go module, for the test release that signs
# the images, charts and CLI artifacts (test/support/release.ts) and the test
# that verifies them (test/release/signatures.test.ts).
# Cached under ~/.cache/rlmesh-testbin/; prints the binary path.
set -euo pipefail
VERSION="${COSIGN_VERSION:-v2.6.5}"
exec "$(dirname "$0")/go-tool.sh" "${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/cosign-$VERSION" cosign "github.com/sigstore/cosign/v2/cmd/cosign@$VERSION"
