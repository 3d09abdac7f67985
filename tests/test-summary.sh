#!/usr/bin/env bash
# The closing lines of `make test`, from the `cargo test` output in $1: every test binary's
# results summed in one line, then each test binary that failed as cargo names it, so that one
# which died without a "test result:" line of its own (a crash, a signal) is not lost.
set -euo pipefail
awk '
/^test result:/ { passed += $4; failed += $6 }
/^error: test failed, to rerun pass / { sub(/^error: test failed, to rerun pass /, ""); binaries[++n] = $0 }
END {
    printf "tests: %d passed, %d failed\n", passed, failed
    for (i = 1; i <= n; i++) printf "failed: %s\n", binaries[i]
}' "$1"
