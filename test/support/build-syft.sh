#!/usr/bin/env bash
# Builds Anchore's Syft (an SBOM scanner nobody here wrote) from its Go module,
# for the test that scans the runtime image (scripts/image/sbom.syft.test.ts).
# Cached under ~/.cache/rlmesh-testbin/; prints the binary path.
set -euo pipefail
VERSION="${SYFT_VERSION:-v1.57.2}"
exec "$(dirname "$0")/go-tool.sh" "${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/syft-$VERSION" syft "github.com/anchore/syft/cmd/syft@$VERSION"
