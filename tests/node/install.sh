#!/usr/bin/env bash
# Installs what the node and the image builds need from Debian's packages, when missing:
# containerd, runc, the CNI plugins, iptables (kube-proxy) and nftables (to remove the tables
# iptables leaves behind), buildah (images without a daemon or
# registry), busybox-static (a shell image), ca-certificates (trusted by the provisioner image)
# and curl. Needs root (CI runs as root).
set -euo pipefail

# command-or-path package
wanted=(
  "containerd containerd" "runc runc" "/usr/lib/cni/bridge containernetworking-plugins"
  "/usr/lib/cni/host-local containernetworking-plugins" "iptables-save iptables" "nft nftables"
  "buildah buildah" "/bin/busybox busybox-static" "/etc/ssl/certs/ca-certificates.crt ca-certificates"
  "curl curl" "ip iproute2" "gcc gcc" "conntrack conntrack"
)
missing=()
for entry in "${wanted[@]}"; do
  what=${entry% *} package=${entry#* }
  if [[ $what == /* ]]; then [[ -e $what ]] && continue; else command -v "$what" >/dev/null && continue; fi
  [[ " ${missing[*]} " == *" $package "* ]] || missing+=("$package")
done
# busybox-static, not the dynamically linked busybox: the image has no libraries.
if [[ -e /bin/busybox && $(ldd /bin/busybox 2>&1 || true) != *"not a dynamic"* ]]; then
  missing+=(busybox-static)
fi
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "node: installing ${missing[*]} needs root (apt-get); run as root or install them" >&2
  exit 1
fi
started=$SECONDS
echo "node: installing ${missing[*]} from Debian's packages..." >&2
export DEBIAN_FRONTEND=noninteractive
# One install at a time, whoever else asks.
exec 9>/run/lock/bucket-provisioner-apt.lock
flock 9
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "node: installed in $((SECONDS - started))s" >&2
