#!/usr/bin/env bash
# Builds versitygw (an S3 gateway; its posix backend serves a directory) from its Go module at the
# pinned version into a cache outside the clone, for the side-by-side figures of `make bench`
# (never for `make test`). A build is skipped when the cache already holds a binary of this
# version built with this Go toolchain. Prints the path of the binary as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=v1.8.0
exec "$here/../go-install.sh" versitygw github.com/versity/versitygw/cmd/versitygw "$version" versitygw
