#!/usr/bin/env bash
# Builds the upstream COSI (Container Object Storage Interface) controller and sidecar at both
# pinned revisions, v0.2.2 (API objectstorage.k8s.io/v1alpha1) and main at ee00c26 (v1alpha2),
# into a cache outside the clone, beside each revision's CRDs and the controller's RBAC.
#
# The source is $COSI_SOURCE (a git bundle or a checkout holding both revisions); without it the
# upstream repository is cloned. Both revisions build offline from their committed vendor/.
# Prints the directory that holds `v1alpha1/` and `v1alpha2/` (each: controller, sidecar,
# crd/*.yaml, controller-rbac.yaml) as its last line; progress goes to stderr.
set -euo pipefail

upstream=https://github.com/kubernetes-sigs/container-object-storage-interface
# api-version=tag-or-branch=commit
revisions=(
  v1alpha1=v0.2.2=f75d47509dae3e4ed0fd18ce0a60474b78e8d29b
  v1alpha2=main=ee00c2690b877f9af3733acb8d03ea2c2a4bd521
)
cache_root=${BUCKET_PROVISIONER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucket-provisioner}

command -v go >/dev/null || { echo "cosi: the Go toolchain (go) is required" >&2; exit 1; }
command -v git >/dev/null || { echo "cosi: git is required" >&2; exit 1; }

# The directory names the pinned commits and the Go toolchain, so a change of either builds again.
stamp=$( (go version; printf '%s\n' "${revisions[@]}") | sha256sum | cut -c1-12)
out="$cache_root/cosi-$stamp"

ready() {
  local entry api
  for entry in "${revisions[@]}"; do
    api=${entry%%=*}
    [[ -x "$out/$api/controller" && -x "$out/$api/sidecar" && -d "$out/$api/crd" ]] || return 1
  done
}

if ready; then
  echo "cosi: cached binaries in $out" >&2
  echo "$out"
  exit 0
fi
mkdir -p "$cache_root"
# make and test binaries may ask at the same time: one builds, the others wait for it.
exec 9>"$cache_root/cosi-build.lock"
flock 9
if ready; then
  echo "cosi: cached binaries in $out" >&2
  echo "$out"
  exit 0
fi

work="$out.partial"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work/src"' EXIT
if [[ -n ${COSI_SOURCE:-} ]]; then
  [[ -e $COSI_SOURCE ]] || { echo "cosi: COSI_SOURCE=$COSI_SOURCE does not exist" >&2; exit 1; }
  echo "cosi: source $COSI_SOURCE" >&2
  git clone --quiet --no-checkout "$COSI_SOURCE" "$work/src" >&2
else
  echo "cosi: cloning $upstream (set COSI_SOURCE to a bundle or checkout to build offline)" >&2
  git clone --quiet --no-checkout "$upstream" "$work/src" >&2
fi

for entry in "${revisions[@]}"; do
  IFS== read -r api ref commit <<<"$entry"
  git -C "$work/src" cat-file -e "$commit^{commit}" 2>/dev/null \
    || { echo "cosi: the source has no commit $commit ($ref)" >&2; exit 1; }
  tree="$work/src-$api"
  rm -rf "$tree"
  git -C "$work/src" worktree add --quiet --detach "$tree" "$commit" >&2
  mkdir -p "$work/$api/crd"
  for program in controller sidecar; do
    started=$SECONDS
    echo "cosi: building $api ($ref) $program (first run only; the controller takes minutes)..." >&2
    ( while sleep 60; do echo "cosi: still building $api $program ($((SECONDS - started))s)" >&2; done ) &
    beat=$!
    rc=0
    (cd "$tree" && GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 \
      go build -trimpath -ldflags="-s -w" -o "$work/$api/$program" "./$program/cmd") >&2 || rc=$?
    kill "$beat" 2>/dev/null || true
    wait "$beat" 2>/dev/null || true
    [[ $rc -eq 0 ]] || { echo "cosi: building $api $program failed" >&2; exit "$rc"; }
    echo "cosi: built $api $program in $((SECONDS - started))s" >&2
  done
  cp "$tree"/client/config/crd/objectstorage.k8s.io_*.yaml "$work/$api/crd/"
  cp "$tree/controller/resources/rbac.yaml" "$work/$api/controller-rbac.yaml"
  echo "$ref $commit" >"$work/$api/REVISION"
  rm -rf "$tree"
done
rm -rf "$work/src"
rm -rf "$out"
mv "$work" "$out"
echo "$out"
