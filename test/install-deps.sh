#!/usr/bin/env bash
# Installs everything the test command needs on a fresh machine: npm packages,
# Debian packages, PyPI tools and the Go-built binaries of the local cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use (one per line; add yours here).
APT_PACKAGES=(
  docker-registry
  iproute2
  curl
  prometheus
  openssl
  squid
  util-linux
  skopeo
  apache2-utils
  umoci
  runc
  containerd
  containernetworking-plugins
  iptables
  conntrack
  ipset
  gcc
  libc6-dev
  zsh
)

missing=()
# dpkg -s also succeeds for a removed package whose config files remain ("rc")
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
for p in "${APT_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[deps] apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -L node_modules ]; then
  # npm ci empties node_modules through the link, i.e. the other checkout's packages
  echo "[deps] node_modules links to $(readlink -f node_modules): left as it is (npm ci would empty it; remove the link to install here)" >&2
else
  echo "[deps] npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi

bash test/cluster/build-binaries.sh >/dev/null
# promtool v3.5.0 from the Prometheus Go module, for `promtool test rules` on the runtime chart's alerts (cached)
bash test/observability/build-prometheus.sh promtool >/dev/null
# Syft v1.57.2, the SBOM scanner scripts/image/sbom.syft.test.ts runs on the runtime image (cached)
bash test/support/build-syft.sh >/dev/null
# cosign v2.6.5, which the test release signs with and test/release/signatures.test.ts verifies with (cached)
bash test/support/build-cosign.sh >/dev/null
