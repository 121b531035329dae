#!/usr/bin/env bash
# Installs Debian's rclone, the S3 client the cache-fill benchmark pipes through
# tee and sha256sum as an operator would. Benchmarks only; the test command
# does not need it.
set -euo pipefail
if ! command -v rclone >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rclone >/dev/null
fi
rclone version | head -1
