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
if ready; then
  echo "control plane: cached binaries in $bin" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
# make and test binaries may ask at the same time: one builds, the others wait for it.
exec 9>"$cache_root/controlplane-build.lock"
flock 9
if ready; then
  echo "control plane: cached binaries in $bin" >&2
  echo "$bin"
  exit 0
fi

rm -rf "$bin.partial"
mkdir -p "$bin.partial"
build() { # module-dir output package
  local started=$SECONDS
  echo "control plane: building $2 (first run only; several minutes on 2 cores)..." >&2
  # A heartbeat, so a long compile never looks like a hang.
  ( while sleep 60; do echo "control plane: still building $2 ($((SECONDS - started))s)" >&2; done ) &
  local beat=$!
  local rc=0
  (cd "$here/$1" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin.partial/$2" "$3") || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  [[ $rc -eq 0 ]] || { echo "control plane: building $2 failed" >&2; exit "$rc"; }
  echo "control plane: built $2 in $((SECONDS - started))s" >&2
}
build etcd etcd go.etcd.io/etcd/server/v3
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager

rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "$bin"
