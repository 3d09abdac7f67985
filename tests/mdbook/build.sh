#!/usr/bin/env bash
# Builds mdBook (which renders the book under docs/) and its mermaid preprocessor (the book's
# diagrams) from the Rust package registry, at the pinned versions, into a cache outside the
# clone. The build is skipped when the cache already holds these versions. Prints the directory
# holding both binaries (mdbook and mdbook-mermaid) as its last line.
set -euo pipefail

mdbook_version=0.5.4
mermaid_version=0.17.1
# Only what `make docs` needs: the HTML renderer with its search index; no `mdbook serve` or
# `watch` (a web server and a file watcher, a third of the build).
features=search
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
root="$cache_root/mdbook-$mdbook_version-mermaid-$mermaid_version"
bin="$root/bin"

command -v cargo >/dev/null || { echo "build.sh: cargo (Rust) is required" >&2; exit 1; }

ready() { [[ -x $bin/mdbook && -x $bin/mdbook-mermaid ]]; }
if ready; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache_root"
# make and test binaries may ask at the same time: one builds, the others wait for it.
exec 9>"$cache_root/mdbook-build.lock"
flock 9
if ready; then
  echo "$bin"
  exit 0
fi

echo "mdbook: building $mdbook_version and mdbook-mermaid $mermaid_version from the package registry (first run only, ~3-5 min)..." >&2
started=$SECONDS
# A heartbeat, so a long compile never looks like a hang.
( while sleep 60; do echo "mdbook: still building ($((SECONDS - started))s)" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
# Their own target directory (not the workspace's), removed afterwards: only the binaries are
# kept. --locked builds with the dependency versions each was released with.
rm -rf "$root.partial"
rc=0
export CARGO_TARGET_DIR="$cache_root/mdbook-target" CARGO_PROFILE_RELEASE_DEBUG=false
cargo install --locked --quiet mdbook --version "$mdbook_version" --no-default-features \
  --features "$features" --root "$root.partial" >&2 || rc=$?
if [[ $rc -eq 0 ]]; then
  cargo install --locked --quiet mdbook-mermaid --version "$mermaid_version" \
    --root "$root.partial" >&2 || rc=$?
fi
kill "$beat" 2>/dev/null || true
[[ $rc -eq 0 ]] || { echo "mdbook: build failed" >&2; exit "$rc"; }
rm -rf "$cache_root/mdbook-target" "$root"
mv "$root.partial" "$root"
echo "mdbook: built in $((SECONDS - started))s" >&2
ready || { echo "mdbook: no binaries in $bin" >&2; exit 1; }
echo "$bin"
