#!/usr/bin/env bash
# Builds one image from a Dockerfile with buildah (Debian's package; no daemon, no registry) and
# writes it as an archive that `ctr images import` and `docker load` read:
#   oci-build.sh REFERENCE DOCKERFILE CONTEXT OUTPUT-PREFIX
# gives OUTPUT-PREFIX.tar and OUTPUT-PREFIX.ref (the reference, for whoever loads it).
# Base images cannot be pulled here, so the Dockerfiles start FROM scratch.
set -euo pipefail

[[ $# -eq 4 ]] || { echo "usage: $0 REFERENCE DOCKERFILE CONTEXT OUTPUT-PREFIX" >&2; exit 2; }
reference=$1 dockerfile=$2 context=$3 out=$4
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
command -v buildah >/dev/null || { echo "image: buildah is required (tests/node/install.sh)" >&2; exit 1; }

# Storage in the cache, not in /var/lib/containers. buildah still writes a blob-info cache there
# and a network lock under /etc/cni: removed again unless they were there before.
storage=(--root "$cache_root/buildah/root" --runroot "$cache_root/buildah/run" --storage-driver vfs)
made=()
for path in /var/lib/containers /etc/cni; do [[ -e $path ]] || made+=("$path"); done
trap 'rm -rf "${made[@]}"' EXIT
mkdir -p "$(dirname "$out")"
started=$SECONDS
buildah "${storage[@]}" bud --quiet --network=none --layers=false -f "$dockerfile" \
  -t "$reference" "$context" >/dev/null
rm -f "$out.tar"
buildah "${storage[@]}" push --quiet "$reference" "docker-archive:$out.tar:$reference"
# Only the archive is kept: the next build starts from the Dockerfile again.
buildah "${storage[@]}" rmi --force "$reference" >/dev/null 2>&1 || true
echo "$reference" >"$out.ref"
echo "image: built $reference ($(du -h "$out.tar" | cut -f1)) in $((SECONDS - started))s" >&2
