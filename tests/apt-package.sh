#!/usr/bin/env bash
# Installs Debian package PACKAGE when COMMAND is missing, and prints COMMAND's path as its last
# line. Needs root to install (CI runs as root). With --no-services the package's services are
# not started (policy-rc.d, the Debian way to say so): only its command is wanted.
#   tests/apt-package.sh COMMAND PACKAGE [--no-services]
set -euo pipefail
command=$1 package=$2 services=${3:-}

if command -v "$command" >/dev/null; then
  command -v "$command"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "$package: installing $command needs root (apt-get install $package)" >&2
  exit 1
fi
started=$SECONDS
echo "$package: installing $command from Debian's $package package..." >&2
export DEBIAN_FRONTEND=noninteractive
# One install at a time, whoever else asks (tests/node/install.sh takes the same lock).
exec 9>/run/lock/bucket-provisioner-apt.lock
flock 9
if ! command -v "$command" >/dev/null; then
  policy=/usr/sbin/policy-rc.d
  if [[ $services == --no-services && ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$package" >/dev/null
fi
echo "$package: $command installed in $((SECONDS - started))s" >&2
command -v "$command"
