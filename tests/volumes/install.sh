#!/usr/bin/env bash
# Installs the filesystem tools the hostPath volume provisioner's btrfs and loop modes run, and
# their tests need (Debian's btrfs-progs, e2fsprogs, xfsprogs), when missing. Prints nothing on
# success but the path of each tool, one a line.
set -euo pipefail
here=$(dirname "$0")
"$here/../apt-package.sh" btrfs btrfs-progs --no-services | tail -1
"$here/../apt-package.sh" mkfs.ext4 e2fsprogs | tail -1
"$here/../apt-package.sh" mkfs.xfs xfsprogs --no-services | tail -1
