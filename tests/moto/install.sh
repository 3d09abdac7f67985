#!/usr/bin/env bash
# Installs moto's server (pinned in requirements.txt beside this script) into a venv in the cache
# outside the clone, unless the venv there was already made from exactly this file and Python.
# Prints the venv directory as its last line; its bin/moto_server is what the tests start.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
venv=${BUCKET_PROVISIONER_MOTO_VENV:-$cache_root/moto-venv}
python=${PYTHON:-python3}

command -v "$python" >/dev/null || { echo "moto: $python (with venv) is required" >&2; exit 1; }
stamp=$( ("$python" --version; cat "$here/requirements.txt") | sha256sum | cut -c1-16)
ready() { [[ -x "$venv/bin/moto_server" && "$(cat "$venv/.stamp" 2>/dev/null)" == "$stamp" ]]; }

mkdir -p "$(dirname "$venv")"
# Test binaries and make may ask at the same time: one installs, the others wait for it.
exec 9>"$venv.lock"
flock 9
if ready; then
  echo "moto: cached venv in $venv" >&2
  echo "$venv"
  exit 0
fi

started=$SECONDS
echo "moto: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv..." >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
"$venv/bin/moto_server" --help >/dev/null
# Written last: an interrupted install has no stamp and is redone from scratch.
echo "$stamp" >"$venv/.stamp"
echo "moto: installed in $((SECONDS - started))s" >&2
echo "$venv"
