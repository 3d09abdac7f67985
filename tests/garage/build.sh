#!/usr/bin/env bash
# Builds Garage (the distributed S3 store the Garage provisioner's tests run against) from the
# Rust package registry, at the pinned version, into a cache outside the clone. The build is
# skipped when the cache already holds that version. Prints the path of the garage binary as its
# last line.
set -euo pipefail

version=2.5.0
# Only what the tests run: the sqlite metadata engine (bundled), no LMDB, K2V or metrics, and
# optimised at level 1. About a third of the default build's time on 2 cores; the directory
# names the build, so a change of it builds again.
features=bundled-libs,sqlite
build=$version-sqlite-o1
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
root="$cache_root/garage-$build"
bin="$root/bin/garage"

command -v cargo >/dev/null || { echo "build.sh: cargo (Rust) is required" >&2; exit 1; }

if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache_root"
# make and test binaries may ask at the same time: one builds, the others wait for it.
exec 9>"$cache_root/garage-build.lock"
flock 9
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

echo "garage: building $version ($features) from the package registry (first run only, ~6-8 min)..." >&2
started=$SECONDS
# A heartbeat, so a long compile never looks like a hang.
( while sleep 60; do echo "garage: still building ($((SECONDS - started))s)" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
# Its own target directory (not the workspace's), removed afterwards: only the binary is kept.
# --locked builds with the dependency versions Garage was released with.
rm -rf "$root.partial"
rc=0
CARGO_TARGET_DIR="$cache_root/garage-target" CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
  CARGO_PROFILE_RELEASE_DEBUG=false cargo install --locked --quiet garage --version "$version" \
  --no-default-features --features "$features" --root "$root.partial" >&2 || rc=$?
kill "$beat" 2>/dev/null || true
[[ $rc -eq 0 ]] || { echo "garage: build failed" >&2; exit "$rc"; }
rm -rf "$cache_root/garage-target" "$root"
mv "$root.partial" "$root"
echo "garage: built $version in $((SECONDS - started))s" >&2
[[ -x $bin ]] || { echo "garage: no binary at $bin" >&2; exit 1; }
echo "$bin"
