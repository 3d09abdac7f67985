#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package) when missing, for `promtool test rules`.
# Prints the path of promtool as its last line. Needs root to install (CI runs as root).
set -euo pipefail

if command -v promtool >/dev/null; then
  command -v promtool
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "prometheus: installing promtool needs root (apt-get install prometheus)" >&2
  exit 1
fi
started=$SECONDS
echo "prometheus: installing promtool from Debian's prometheus package..." >&2
export DEBIAN_FRONTEND=noninteractive
# One install at a time, whoever else asks (tests/node/install.sh takes the same lock).
exec 9>/run/lock/bucket-provisioner-apt.lock
flock 9
if ! command -v promtool >/dev/null; then
  # Only promtool is wanted: the package's server must not start here. policy-rc.d is the
  # Debian way to say so; one already in place is left as it is.
  policy=/usr/sbin/policy-rc.d
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
echo "prometheus: promtool installed in $((SECONDS - started))s" >&2
command -v promtool
