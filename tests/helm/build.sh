#!/usr/bin/env bash
# Builds helm from the Go module pinned beside this script, into a cache outside the clone. A
# build is skipped when the cache already holds a binary built from exactly these go.mod/go.sum
# files with this Go toolchain. Prints the path of the helm binary as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is required" >&2; exit 1; }

# What `helm version` says and the Kubernetes version `helm template` assumes come from the pinned
# modules, as helm's own release build sets them.
helm_version=$(sed -n 's|^\thelm.sh/helm/v3 \(v[^ ]*\).*|\1|p' "$here/go.mod")
k8s_minor=$(sed -n 's|^\tk8s.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$here/go.mod")
[[ -n $helm_version && -n $k8s_minor ]] || { echo "build.sh: no helm or client-go pin in go.mod" >&2; exit 1; }
go_ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
for package in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  go_ldflags+=" -X $package.k8sVersionMajor=1 -X $package.k8sVersionMinor=$k8s_minor"
done

stamp=$( (go version; echo "$go_ldflags"; cat "$here"/go.mod "$here"/go.sum) | sha256sum | cut -c1-16)
bin="$cache_root/helm-$stamp"

# shellcheck source=../go-cache.sh
source "$here/../go-cache.sh"
build_tool "$here" helm helm.sh/helm/v3/cmd/helm
