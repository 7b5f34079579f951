#!/usr/bin/env bash
# Installs a Debian package a test needs when its command is missing:
#   scripts/ensure-apt.sh COMMAND [PACKAGE]     (PACKAGE defaults to COMMAND)
# Used for chromium (the browser tests, e2e/suite_browser_test.go), bubblewrap (the sandboxed stdio
# servers, services/toolhost/sandbox) and prometheus (the metrics test,
# e2e/ops_metrics_test.go, which starts its own prometheus on 127.0.0.1 with its storage in a
# temporary directory; a service the package's postinst may try to start is never used).
# Idempotent and fast when the command is there: one `command -v`, no apt call. Uses sudo only
# when not root (a CI container usually runs as root without sudo).
set -euo pipefail

cmd="${1:?usage: ensure-apt.sh COMMAND [PACKAGE]}"
pkg="${2:-$cmd}"

if command -v "$cmd" >/dev/null 2>&1; then
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "ensure-apt: $cmd is missing and sudo is not available; install it as root: apt-get install -y --no-install-recommends $pkg" >&2; exit 1; }
	SUDO=sudo
fi

echo "ensure-apt: installing Debian's $pkg with apt-get (for $cmd)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "$pkg"
command -v "$cmd" >/dev/null 2>&1 || { echo "ensure-apt: apt-get finished but $cmd is still not on PATH" >&2; exit 1; }
