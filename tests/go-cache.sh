# Sourced by the scripts of tests/ that build Go programs (the control plane, the node, helm,
# kubectl, the Go consumer): Go binaries built into a cache
# outside the clone, one build at a time. The caller sets `label`, `cache_root` and `bin` and
# defines `ready` (whether $bin holds every binary).

# Prints $bin and exits when it is ready; otherwise takes the lock `$1` (waiting for any build
# already running, then checking again) and leaves an empty $bin.partial to build into.
reuse_or_lock() {
  if ready; then
    echo "$label: cached binaries in $bin" >&2
    echo "$bin"
    exit 0
  fi
  mkdir -p "$cache_root"
  # make and test binaries may ask at the same time: one builds, the others wait for it.
  exec 9>"$cache_root/$1.lock"
  flock 9
  if ready; then
    echo "$label: cached binaries in $bin" >&2
    echo "$bin"
    exit 0
  fi
  rm -rf "$bin.partial"
  mkdir -p "$bin.partial"
}

# go_build MODULE-DIR OUTPUT PACKAGE [GO BUILD FLAG...]: a static binary into $bin.partial, linked
# with the caller's `go_ldflags` (if any) after -s -w.
go_build() {
  local dir=$1 out=$2 package=$3 started=$SECONDS rc=0
  shift 3
  echo "$label: building $out (first run only)..." >&2
  # A heartbeat, so a long compile never looks like a hang.
  ( while sleep 60; do echo "$label: still building $out ($((SECONDS - started))s)" >&2; done ) &
  local beat=$!
  (cd "$dir" && CGO_ENABLED=0 go build "$@" -trimpath -ldflags="-s -w ${go_ldflags:-}" -o "$bin.partial/$out" "$package") || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  [[ $rc -eq 0 ]] || { echo "$label: building $out failed" >&2; exit "$rc"; }
  echo "$label: built $out in $((SECONDS - started))s" >&2
}

# build_tool MODULE-DIR NAME PACKAGE: for a script that wants one binary, $bin/NAME. Prints its
# path at once when the cache holds it; otherwise builds it (one build at a time, linked with the
# caller's `go_ldflags`) and then prints it.
build_tool() {
  local dir=$1 name=$2 package=$3
  ready() { [[ -x "$bin/$name" ]]; }
  label=$name
  if ! ready; then
    (
      reuse_or_lock "$name-build" >/dev/null
      go_build "$dir" "$name" "$package"
      rm -rf "$bin"
      mv "$bin.partial" "$bin"
    )
    ready || { echo "$name: no binary in $bin" >&2; exit 1; }
  fi
  echo "$bin/$name"
}
