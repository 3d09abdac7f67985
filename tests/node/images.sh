#!/usr/bin/env bash
# Builds the images the end-to-end tests run besides the provisioner's own (`make image`):
# the pod sandbox (pause), a shell for init containers (busybox), the consumer application and
# the upstream COSI sidecar (v0.2.2 and main, from the directory tests/cosi/build.sh prints).
#   images.sh NODE-BIN-DIR STATIC-BINARY-DIR OUTPUT-DIR COSI-DIR
set -euo pipefail

[[ $# -eq 4 ]] || { echo "usage: $0 NODE-BIN-DIR STATIC-BINARY-DIR OUTPUT-DIR COSI-DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
node_bin=$1 static=$2 out=$3 cosi=$4
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
context=$(mktemp -d "$cache_root/image-context.XXXXXX")
trap 'rm -rf "$context"' EXIT

mkdir -p "$context/pause"
cp "$node_bin/pause" "$context/pause/"
"$here/oci-build.sh" localhost/bucket-provisioner-pause:e2e "$here/images/pause.Dockerfile" \
  "$context/pause" "$out/pause"

mkdir -p "$context/busybox/bin"
cp /bin/busybox "$context/busybox/bin/"
for applet in $(/bin/busybox --list); do
  [[ $applet == busybox ]] || ln -s busybox "$context/busybox/bin/$applet"
done
"$here/oci-build.sh" localhost/bucket-provisioner-busybox:e2e "$here/images/busybox.Dockerfile" \
  "$context/busybox" "$out/busybox"

mkdir -p "$context/consumer"
cp "$static/examples/consumer" "$context/consumer/bucket-consumer"
"$here/oci-build.sh" localhost/bucket-consumer:e2e "$here/images/consumer.Dockerfile" \
  "$context/consumer" "$out/consumer"

# The upstream COSI sidecar at both pinned revisions. A FROM scratch image runs only a binary
# that needs no loader or libraries.
for entry in v1alpha1=cosi-sidecar=v0.2.2 v1alpha2=cosi-sidecar-v1alpha2=main-ee00c26; do
  IFS== read -r api name tag <<<"$entry"
  sidecar="$cosi/$api/sidecar"
  [[ $(ldd "$sidecar" 2>&1 || true) == *"not a dynamic"* ]] \
    || { echo "image: $sidecar is not statically linked" >&2; exit 1; }
  mkdir -p "$context/$name"
  cp "$sidecar" "$context/$name/sidecar"
  "$here/oci-build.sh" "localhost/cosi-sidecar:$tag" "$here/images/cosi-sidecar.Dockerfile" \
    "$context/$name" "$out/$name"
done
