#!/usr/bin/env bash
# Builds the real Kubernetes control plane, the kubelet and kube-proxy (real
# nodes: test/cluster/real-node.ts), CoreDNS (the cluster DNS, a real pod),
# kube-router (its NetworkPolicy firewall only), etcd, kwok, kubectl and helm from the
# Go module proxy, once per version, into ~/.cache/rlmesh-testbin/<version>/bin.
# Nothing is downloaded but Go modules; nothing lands in the repository.
#
# The Kubernetes binaries (kubectl is the CRD hook image's) are built from the
# go.mod and go.sum committed in test/cluster/go/kubernetes, with -mod=readonly:
# a module whose content differs from its go.sum line fails the build with Go's
# "checksum mismatch" naming it. A cached binary counts only if it was built
# from exactly those two files. After changing K8S_VERSION, record its modules:
#
#   K8S_VERSION=vX.Y.Z bash test/cluster/build-binaries.sh --go-mod update   (review the diff, commit it)
#   bash test/cluster/build-binaries.sh --go-mod check    (the committed files are what the proxy resolves)
#
#   bash test/cluster/build-binaries.sh [TOOL ...]   (default all; e.g. kubectl builds just that)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CT_VERSION="${CT_VERSION:-v3.14.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
# the only kube-router the Go module proxy serves here; advisories are reported against it, acceptable
# only because it enforces NetworkPolicies of this loopback-contained test cluster (README)
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
CACHE="${RLMESH_TESTBIN:-$HOME/.cache/rlmesh-testbin}/$K8S_VERSION"
BIN="$CACHE/bin"
K8S_PIN="$(cd "$(dirname "$0")" && pwd)/go/kubernetes"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

log() { printf '[build] %s\n' "$*" >&2; }
fail() { printf '[build] error: %s\n' "$*" >&2; exit 1; }
have() { [ -x "$BIN/$1" ] && [ -f "$BIN/.$1.stamp" ]; }
stamp() { echo "$2" > "$BIN/.$1.stamp"; }

k8s_targets=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

# Writes into $1 the go.mod and go.sum of a module requiring k8s.io/kubernetes@$K8S_VERSION,
# resolved from the Go module proxy (go get checks each module against sum.golang.org).
resolve_k8s_modules() {
  cd "$1"
  log "resolving k8s.io/kubernetes@$K8S_VERSION"
  local gomod staging_version goline pkgs=() t
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0${K8S_VERSION#v1}"   # v1.35.4 -> v0.35.4
  goline=$(grep -m1 '^go ' "$gomod")
  {
    echo "module rlmesh-testbin/kubernetes"
    echo
    echo "$goline"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    # every staging module k8s.io/kubernetes replaces with ./staging/... gets the published release
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging_version"'#p' "$gomod"
  } > go.mod
  log "$(grep -c '^replace' go.mod) staging replace lines generated from $gomod"
  for t in "${k8s_targets[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t@$K8S_VERSION"); done
  go get "${pkgs[@]}"
}

if [ "${1:-}" = --go-mod ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  ( resolve_k8s_modules "$tmp" )
  case "${2:-}" in
    update)
      mkdir -p "$K8S_PIN" && cp "$tmp/go.mod" "$tmp/go.sum" "$K8S_PIN/"
      log "wrote $K8S_PIN/go.mod and go.sum for k8s.io/kubernetes $K8S_VERSION: review the diff and commit it" ;;
    check)
      diff -u "$K8S_PIN/go.mod" "$tmp/go.mod" >&2 && diff -u "$K8S_PIN/go.sum" "$tmp/go.sum" >&2 ||
        fail "$K8S_PIN/go.mod or go.sum differs (above) from what k8s.io/kubernetes@$K8S_VERSION resolves to from the Go module proxy; if the change is expected, run: K8S_VERSION=$K8S_VERSION bash $0 --go-mod update, and commit the result"
      log "$K8S_PIN: go.mod and go.sum are what k8s.io/kubernetes@$K8S_VERSION resolves to" ;;
    *) fail "usage: $0 --go-mod update|check" ;;
  esac
  exit 0
fi

all_tools=("${k8s_targets[@]}" etcd kwok helm coredns kube-router ct yamllint)
for t in "$@"; do
  [[ " ${all_tools[*]} " == *" $t "* ]] || fail "unknown tool $t; this script builds ${all_tools[*]} (all of them without an argument)"
done
only=("$@")
want() { [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $1 "* ]]; }
mkdir -p "$BIN"

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy ---
src="$CACHE/src/kubernetes"
# a binary is current if it was built from the committed go.mod and go.sum (they are copied beside it)
pinned() { cmp -s "$K8S_PIN/go.mod" "$src/go.mod" && cmp -s "$K8S_PIN/go.sum" "$src/go.sum"; }
stale=()
for t in "${k8s_targets[@]}"; do
  if want "$t" && ! { have "$t" && pinned; }; then stale+=("$t"); fi
done
if [ ${#stale[@]} -gt 0 ]; then
  pinned_version=$(sed -n 's#^require k8s.io/kubernetes \(v[^ ]*\)$#\1#p' "$K8S_PIN/go.mod")
  [ "$pinned_version" = "$K8S_VERSION" ] ||
    fail "K8S_VERSION is $K8S_VERSION but $K8S_PIN/go.mod pins k8s.io/kubernetes ${pinned_version:-(none)}; record the modules of $K8S_VERSION first: K8S_VERSION=$K8S_VERSION bash $0 --go-mod update, review the diff and commit it"
  mkdir -p "$src"; cd "$src"
  # first unstamp what is about to be rebuilt and, if the modules change, every binary built from
  # the old ones: an interrupted build then leaves no binary current that is not
  for t in "${k8s_targets[@]}"; do
    if [[ " ${stale[*]} " == *" $t "* ]] || ! pinned; then rm -f "$BIN/.$t.stamp"; fi
  done
  cp "$K8S_PIN/go.mod" "$K8S_PIN/go.sum" .
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for t in "${stale[@]}"; do
    log "building $t $K8S_VERSION from $K8S_PIN/go.sum"
    go build -mod=readonly -trimpath -ldflags "$ld" -o "$BIN/$t" "k8s.io/kubernetes/cmd/$t"
    stamp "$t" "$K8S_VERSION"
  done
fi

# --- etcd at the version k8s.io/kubernetes pins ---
if want etcd && ! have etcd; then
  src="$CACHE/src/etcd"; mkdir -p "$src"; cd "$src"
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$gomod")
  log "building etcd $etcd_version (pinned by k8s.io/kubernetes $K8S_VERSION)"
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module rlmesh-testbin/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$etcd_version" > go.mod
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .
  stamp etcd "$etcd_version"
fi

# --- kwok ---
if want kwok && ! have kwok; then
  log "building kwok $KWOK_VERSION"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  stamp kwok "$KWOK_VERSION"
fi

# --- helm ---
if want helm && ! have helm; then
  log "building helm $HELM_VERSION"
  # as helm's Makefile does: the default Kubernetes version helm templates for comes from its client-go
  helm_mod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  kminor=$(awk '$1=="k8s.io/client-go"{split($2,v,"."); print v[2]; exit}' "$helm_mod")
  ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do ld="$ld -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"; done
  GOBIN="$BIN" go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp helm "$HELM_VERSION"
fi

# --- CoreDNS and kube-router: a throwaway module that requires the exact version, as for ct ---
gomod_build() { # name module version package ldflags
  local name=$1 module=$2 version=$3 pkg=$4 ld=$5 src="$CACHE/src/$1"
  want "$name" && ! have "$name" || return 0
  log "building $name $version"
  mkdir -p "$src"; cd "$src"
  printf 'module rlmesh-testbin/%s\n\ngo 1.21\n\nrequire %s %s\n' "$name" "$module" "$version" > go.mod
  go get "$pkg@$version"
  go build -trimpath -ldflags "-s -w $ld" -o "$BIN/$name" "$pkg"
  stamp "$name" "$version"
}
gomod_build coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns \
  ""
gomod_build kube-router github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
  "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION"

# --- chart-testing (ct) with its config files, and yamllint + yamale from PyPI ---
if want ct && ! have ct; then
  log "building ct $CT_VERSION"
  # `go install pkg@version` asks the proxy for the module's version list, which it refuses
  # for this module; a throwaway module that requires the exact version builds it.
  src="$CACHE/src/ct"; mkdir -p "$src"; cd "$src"
  printf 'module rlmesh-testbin/ct\n\ngo 1.24\n\nrequire github.com/helm/chart-testing/v3 %s\n' "$CT_VERSION" > go.mod
  go get "github.com/helm/chart-testing/v3/ct@$CT_VERSION"
  go build -trimpath -ldflags "-s -w -X github.com/helm/chart-testing/v3/ct/cmd.Version=$CT_VERSION" -o "$BIN/ct" github.com/helm/chart-testing/v3/ct
  ctdir=$(go mod download -json "github.com/helm/chart-testing/v3@$CT_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$CACHE/etc/ct" && cp "$ctdir"/etc/*.yaml "$CACHE/etc/ct/" && chmod 644 "$CACHE/etc/ct/"*.yaml
  stamp ct "$CT_VERSION"
fi
if want yamllint && { [ ! -x "$CACHE/venv/bin/yamllint" ] || [ ! -x "$CACHE/venv/bin/yamale" ]; }; then
  log "installing yamllint and yamale from PyPI"
  python3 -m venv "$CACHE/venv"
  "$CACHE/venv/bin/pip" install -q yamllint==1.38.0 yamale==6.1.0
fi
if want yamllint; then ln -sf "$CACHE/venv/bin/yamllint" "$CACHE/venv/bin/yamale" "$BIN/"; fi

echo "$BIN"
