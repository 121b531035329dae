#!/usr/bin/env bash
# The integration projects as test/ci runs them (vitest.config.ts says which file is in which):
# `integration` (the end-to-end lane) and `components` as two vitest processes side by side,
# since most of their time is spent waiting on the cluster, then `exclusive` alone. The
# components lane's output is kept in a file and printed when both lanes are done, so that
# neither lane's lines interleave with the other's. Exits non-zero when any lane fails; the
# exclusive files run either way, so one run reports every failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH"
# one run of test/cluster/up before the lanes: each lane's global setup then finds it running
test/cluster/up >/dev/null || exit 1
log="$(mktemp -t rlmesh-components-lane.XXXXXX)"
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
npx vitest run --project components "$@" >"$log" 2>&1 &
components=$!
npx vitest run --project integration "$@"; e2e=$?
wait "$components"; comp=$?
printf '\n=== the components lane (beside the end-to-end lane), exit %s\n' "$comp"
cat "$log"
printf '\n=== both lanes done in %ss; the exclusive files\n' "$(( $(date +%s) - t0 ))"
npx vitest run --project exclusive "$@"; excl=$?
printf '\n=== lanes: end-to-end exit %s, components exit %s, exclusive exit %s\n' "$e2e" "$comp" "$excl"
[ "$e2e" = 0 ] && [ "$comp" = 0 ] && [ "$excl" = 0 ]
