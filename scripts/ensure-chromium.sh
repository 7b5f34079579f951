#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (e2e/browser_test.go) when it is missing.
# Idempotent and fast when chromium is already there: one `command -v`, no apt call.
# Uses sudo only when not root (a CI container usually runs as root without sudo).
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "ensure-chromium: chromium is missing and sudo is not available; install it as root: apt-get install -y --no-install-recommends chromium" >&2; exit 1; }
	SUDO=sudo
fi

echo "ensure-chromium: installing Debian's chromium with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
command -v chromium >/dev/null 2>&1 || { echo "ensure-chromium: apt-get finished but chromium is still not on PATH" >&2; exit 1; }
