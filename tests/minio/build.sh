#!/usr/bin/env bash
# Builds MinIO from its Go module at the pinned version into a cache outside the clone, for the
# side-by-side figures of `make bench` (never for `make test`). A build is skipped when the cache
# already holds a binary of this version built with this Go toolchain. MinIO tags its releases
# RELEASE.<date>, which Go does not take for versions, so the pin is the module proxy's
# pseudo-version of a commit. Prints the path of the binary as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=v0.0.0-20260212201848-7aac2a2c5b7c
exec "$here/../go-install.sh" minio github.com/minio/minio "$version" minio
