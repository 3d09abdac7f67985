#!/usr/bin/env bash
# Installs the AWS CLI (pinned in requirements.txt beside this script) into a venv in the cache
# outside the clone, unless the venv there was already made from exactly this file and Python.
# Prints the path of its `aws` as the last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}
python=${PYTHON:-python3}

command -v "$python" >/dev/null || { echo "awscli: $python (with venv) is required" >&2; exit 1; }
stamp=$( ("$python" --version; cat "$here/requirements.txt") | sha256sum | cut -c1-16)
venv="$cache_root/awscli-$stamp"
ready() { [[ -x "$venv/bin/aws" && -f "$venv/.installed" ]]; }

mkdir -p "$cache_root"
exec 9>"$cache_root/awscli.lock"
flock 9
if ready; then
  echo "awscli: cached venv in $venv" >&2
  echo "$venv/bin/aws"
  exit 0
fi
started=$SECONDS
echo "awscli: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv..." >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
"$venv/bin/aws" --version >&2
# Written last: an interrupted install is redone from scratch.
touch "$venv/.installed"
echo "awscli: installed in $((SECONDS - started))s" >&2
echo "$venv/bin/aws"
