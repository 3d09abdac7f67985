#!/usr/bin/env bash
# Installs strace (Debian's package) when missing: the hostPath durability test records what a
# PUT syncs with it. Prints the path of strace as its last line. Needs root to install.
set -euo pipefail

if command -v strace >/dev/null; then
  command -v strace
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "strace: installing it needs root (apt-get install strace)" >&2
  exit 1
fi
started=$SECONDS
echo "strace: installing Debian's strace package..." >&2
export DEBIAN_FRONTEND=noninteractive
# One install at a time, whoever else asks (the other install scripts take the same lock).
exec 9>/run/lock/bucket-provisioner-apt.lock
flock 9
if ! command -v strace >/dev/null; then
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends strace >/dev/null
fi
echo "strace: installed in $((SECONDS - started))s" >&2
command -v strace
