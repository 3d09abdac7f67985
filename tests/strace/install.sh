#!/usr/bin/env bash
# Installs strace (Debian's package) when missing: the hostPath durability test records what a
# PUT syncs with it. Prints the path of strace as its last line.
exec "$(dirname "$0")/../apt-package.sh" strace strace
