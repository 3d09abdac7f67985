#!/usr/bin/env bash
# Builds the Go aws-s3-provisioner (the provisioner the S3 takeover tests replace) offline, from
# the source given in BUCKET_PROVISIONER_AWS_S3_PROVISIONER_SOURCE: a directory holding the
# upstream tree at 3d337b2 as `aws-s3-provisioner-3d337b2.tar.gz` (with its vendor/) and, in
# `1f19612/`, the go.mod, go.sum and cmd/util.go of its last release, without which that commit
# does not build. The binary goes to a cache outside the clone, named by a digest of those inputs
# and the Go toolchain, and is reused while they stay the same. Prints its path as the last line.
set -euo pipefail

src=${BUCKET_PROVISIONER_AWS_S3_PROVISIONER_SOURCE:-}
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

[[ -n $src ]] || { echo "aws-s3-provisioner: BUCKET_PROVISIONER_AWS_S3_PROVISIONER_SOURCE is not set" >&2; exit 1; }
tarball="$src/aws-s3-provisioner-3d337b2.tar.gz"
release="$src/1f19612"
for f in "$tarball" "$release/go.mod" "$release/go.sum" "$release/util.go"; do
  [[ -f $f ]] || { echo "aws-s3-provisioner: $f is missing" >&2; exit 1; }
done
command -v go >/dev/null || { echo "aws-s3-provisioner: the Go toolchain (go) is required" >&2; exit 1; }

stamp=$( (go version; cat "$tarball" "$release/go.mod" "$release/go.sum" "$release/util.go") \
  | sha256sum | cut -c1-16)
bin="$cache_root/aws-s3-provisioner-$stamp/aws-s3-provisioner"

if [[ -x $bin ]]; then
  echo "aws-s3-provisioner: cached binary $bin" >&2
  echo "$bin"
  exit 0
fi
mkdir -p "$cache_root"
# make and test binaries may ask at the same time: one builds, the others wait for it.
exec 9>"$cache_root/aws-s3-provisioner-build.lock"
flock 9
if [[ -x $bin ]]; then
  echo "aws-s3-provisioner: cached binary $bin" >&2
  echo "$bin"
  exit 0
fi

echo "aws-s3-provisioner: building from $src (offline, first run only, ~30 s)..." >&2
started=$SECONDS
work="$cache_root/aws-s3-provisioner-$stamp.partial"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
tar xzf "$tarball" -C "$work"
tree="$work/aws-s3-provisioner"
cp "$release/go.mod" "$release/go.sum" "$tree/"
cp "$release/util.go" "$tree/cmd/util.go"
# The release's go.mod names no Go version; vendored builds need one to read vendor/modules.txt.
sed -i 's#^module github.com/yard-turkey/aws-s3-provisioner$#&\n\ngo 1.13#' "$tree/go.mod"
# Its own Go build cache, so nothing outside the cache is written and a rebuild is clean.
(cd "$tree" && GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 \
  GOCACHE="$cache_root/aws-s3-provisioner-gocache" go build -trimpath -o aws-s3-provisioner ./cmd/) >&2 \
  || { echo "aws-s3-provisioner: build failed" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
mv "$tree/aws-s3-provisioner" "$bin.partial"
mv "$bin.partial" "$bin"
echo "aws-s3-provisioner: built in $((SECONDS - started))s" >&2
echo "$bin"
