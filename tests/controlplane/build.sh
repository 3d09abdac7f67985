#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the Go modules pinned beside this
# script, into a cache outside the clone. A build is skipped when the cache already holds binaries
# built from exactly these go.mod/go.sum files with this Go toolchain.
# Prints the directory that holds the binaries as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is required" >&2; exit 1; }

stamp=$( (go version; cat "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum \
  "$here"/etcd/go.mod "$here"/etcd/go.sum) | sha256sum | cut -c1-16)
bin="$cache_root/controlplane-$stamp"

ready() { [[ -x "$bin/etcd" && -x "$bin/kube-apiserver" && -x "$bin/kube-controller-manager" ]]; }
label="control plane"
# shellcheck source=../go-cache.sh
source "$here/../go-cache.sh"
reuse_or_lock controlplane-build

go_build "$here/etcd" etcd go.etcd.io/etcd/server/v3
go_build "$here/kubernetes" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
go_build "$here/kubernetes" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager

rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "$bin"
