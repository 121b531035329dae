#!/usr/bin/env bash
# Builds Stripe's smokescreen (the egress proxy a platform engineer would pick
# for this job) from its Go module, for test/bench/egress.ts. Cached under
# ~/.cache/rlmesh-testbin/; prints the binary path. Benchmarks only.
set -euo pipefail
VERSION="${SMOKESCREEN_VERSION:-v0.1.0}"
exec "$(dirname "$0")/../support/go-tool.sh" "${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/smokescreen-$VERSION" smokescreen "github.com/stripe/smokescreen@$VERSION"
