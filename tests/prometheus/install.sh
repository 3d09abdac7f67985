#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package, its server not started) when missing, for
# `promtool test rules`. Prints the path of promtool as its last line.
exec "$(dirname "$0")/../apt-package.sh" promtool prometheus --no-services
