#!/usr/bin/env bash
# Builds the node's own binaries into a cache outside the clone: kubelet, kube-proxy and
# kube-scheduler from the Kubernetes module pinned in tests/node/kubernetes (the control plane's
# release), CoreDNS from tests/node/coredns, and the pod sandbox's pause program from the pinned
# Kubernetes source. A build is skipped when the cache holds binaries made from exactly these
# files with this Go and C toolchain.
# Prints the directory that holds the binaries as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
controlplane="$here/../controlplane/kubernetes"
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "node build: the Go toolchain (go) is required" >&2; exit 1; }
command -v gcc >/dev/null || { echo "node build: gcc is required for the pause program" >&2; exit 1; }

# The node must run the control plane's release: every module version the control plane pins
# appears unchanged in the node's go.mod.
pins() {
  awk '/^(require|replace) \($/ { block = 1; next } /^\)/ { block = 0 }
       /^(require|replace) [^(]/ { sub(/^(require|replace) /, ""); block_line = 1 }
       block || block_line { sub(/\/\/.*/, ""); gsub(/^[ \t]+|[ \t]+$/, ""); if ($0 != "") print; block_line = 0 }' \
    "$1" | sort
}
drift=$(comm -23 <(pins "$controlplane/go.mod") <(pins "$here/kubernetes/go.mod"))
if [[ -n "$drift" ]]; then
  echo "node build: tests/node/kubernetes/go.mod differs from the control plane's pins:" >&2
  echo "$drift" >&2
  echo "node build: copy tests/controlplane/kubernetes/go.{mod,sum} there and run" >&2
  echo "  go get -tool k8s.io/kubernetes/cmd/{kubelet,kube-proxy,kube-scheduler}@<version>" >&2
  exit 1
fi

stamp=$( (go version; gcc --version | head -1; cat "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum \
  "$here"/coredns/go.mod "$here"/coredns/go.sum "$here"/coredns/main.go) | sha256sum | cut -c1-16)
bin="$cache_root/node-$stamp"
ready() { [[ -x "$bin/kubelet" && -x "$bin/kube-proxy" && -x "$bin/kube-scheduler" \
  && -x "$bin/coredns" && -x "$bin/pause" ]]; }

label=node
# shellcheck source=../go-cache.sh
source "$here/../go-cache.sh"
reuse_or_lock node-build

go_build "$here/kubernetes" kubelet k8s.io/kubernetes/cmd/kubelet -mod=readonly
go_build "$here/kubernetes" kube-proxy k8s.io/kubernetes/cmd/kube-proxy -mod=readonly
go_build "$here/kubernetes" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler -mod=readonly
go_build "$here/coredns" coredns . -mod=readonly

# The sandbox ("pause") program, from the source of the pinned release, linked statically so
# its image needs nothing else.
k8s_dir=$(cd "$here/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
[[ -n "$k8s_dir" ]] || { (cd "$here/kubernetes" && go mod download k8s.io/kubernetes); \
  k8s_dir=$(cd "$here/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes); }
version=$(cd "$here/kubernetes" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
gcc -Os -static -Wall -DVERSION="$version" -o "$bin.partial/pause" "$k8s_dir/build/pause/linux/pause.c"
strip "$bin.partial/pause"
echo "node: built pause ($version)" >&2

rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "$bin"
