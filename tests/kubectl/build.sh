#!/usr/bin/env bash
# Builds kubectl from the Go module pinned beside this script (the control plane's version), into
# a cache outside the clone, for the book's runnable examples. A build is skipped when the cache
# already holds a binary built from exactly these files with this Go toolchain. Prints the path
# of the kubectl binary as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is required" >&2; exit 1; }

# What `kubectl version` says comes from the pinned module, as kubectl's release build sets it.
kubectl_minor=$(sed -n 's|^\tk8s.io/kubectl v0\.\([0-9.]*\)$|\1|p' "$here/go.mod")
[[ -n $kubectl_minor ]] || { echo "build.sh: no kubectl pin in go.mod" >&2; exit 1; }
go_ldflags="-X k8s.io/component-base/version.gitVersion=v1.$kubectl_minor"

stamp=$( (go version; echo "$go_ldflags"; cat "$here"/go.mod "$here"/go.sum "$here"/main.go) \
  | sha256sum | cut -c1-16)
bin="$cache_root/kubectl-$stamp"

# shellcheck source=../go-cache.sh
source "$here/../go-cache.sh"
build_tool "$here" kubectl .
