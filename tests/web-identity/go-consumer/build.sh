#!/usr/bin/env bash
# Builds the AWS SDK for Go v2 consumer beside this script (its modules pinned in go.mod/go.sum)
# into a cache outside the clone, reused while those files and the Go toolchain stay the same.
# Prints the binary's path as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "go-consumer: the Go toolchain (go) is required" >&2; exit 1; }

stamp=$( (go version; cat "$here"/go.mod "$here"/go.sum "$here"/main.go) | sha256sum | cut -c1-16)
bin="$cache_root/go-consumer-$stamp"

# shellcheck source=../../go-cache.sh
source "$here/../../go-cache.sh"
build_tool "$here" go-consumer .
