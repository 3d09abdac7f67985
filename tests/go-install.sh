#!/usr/bin/env bash
# go-install.sh LABEL PACKAGE VERSION BINARY: `go install PACKAGE@VERSION` into a directory of the
# cache outside the clone named by the label, version and Go toolchain, once; later runs reuse it.
# The build has a Go build cache of its own, emptied afterwards (these builds are large and rare).
# Prints the path of the binary as its last line.
set -euo pipefail

label=$1 package=$2 version=$3 binary=$4
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
command -v go >/dev/null || { echo "go-install.sh: the Go toolchain (go) is required" >&2; exit 1; }

stamp=$( (go version; echo "$package@$version") | sha256sum | cut -c1-16)
bin="$cache_root/$label-$stamp"
ready() { [[ -x "$bin/$binary" ]]; }
# shellcheck source=go-cache.sh
source "$(dirname "$0")/go-cache.sh"
(
  reuse_or_lock "$label-build" >/dev/null
  echo "$label: building $package@$version (first run only)..." >&2
  started=$SECONDS
  ( while sleep 60; do echo "$label: still building ($((SECONDS - started))s)" >&2; done ) &
  beat=$!
  export GOCACHE="$cache_root/go-build-$label"
  rc=0
  CGO_ENABLED=0 GOBIN="$bin.partial" go install -trimpath -ldflags="-s -w" "$package@$version" || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  go clean -cache >/dev/null 2>&1 || true
  rm -rf "$GOCACHE"
  [[ $rc -eq 0 ]] || { echo "$label: building $package@$version failed" >&2; exit "$rc"; }
  echo "$label: built in $((SECONDS - started))s" >&2
  rm -rf "$bin"
  mv "$bin.partial" "$bin"
)
ready || { echo "$label: no binary in $bin" >&2; exit 1; }
echo "$bin/$binary"
