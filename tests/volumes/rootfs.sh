#!/usr/bin/env bash
# Copies the programs the volume provisioner's btrfs and loop modes run, with the shared
# libraries and loader they link, from this machine (Debian's btrfs-progs, e2fsprogs, xfsprogs,
# util-linux) into DEST at the same paths, for the image's Dockerfile to copy in:
#   rootfs.sh DEST
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 DEST" >&2; exit 2; }
dest=$1
programs=(btrfs mkfs.ext4 resize2fs mkfs.xfs xfs_growfs mount umount losetup)
mkdir -p "$dest"
copy() { # the file behind $1 (links followed), at path $1 under $dest
  mkdir -p "$dest$(dirname "$1")"
  cp -L "$1" "$dest$1"
}
for program in "${programs[@]}"; do
  path=$(command -v "$program") || {
    echo "rootfs: $program is missing (tests/volumes/install.sh installs it)" >&2
    exit 1
  }
  copy "$path"
  # Every library ldd names by path, the loader included; setuid bits are not copied (the
  # provisioner runs them as root).
  for library in $(ldd "$path" | grep -o '/[^ ]*'); do
    [[ -e $dest$library ]] || copy "$library"
  done
done
# mke2fs's defaults (features, inode sizes) as on the host; without it, built-in older ones.
[[ ! -f /etc/mke2fs.conf ]] || copy /etc/mke2fs.conf
