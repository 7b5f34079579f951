#!/usr/bin/env bash
# Installs Debian's prometheus for the metrics e2e test (e2e/metrics_test.go) when it is
# missing. Idempotent and fast when prometheus is already there: one `command -v`, no apt call.
# Uses sudo only when not root. The package's postinst may try to start its own service (in a
# container without systemd it cannot); the test never uses that one: it starts its own
# prometheus on 127.0.0.1 with a generated configuration and its storage in a temporary
# directory.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1; then
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "ensure-prometheus: prometheus is missing and sudo is not available; install it as root: apt-get install -y --no-install-recommends prometheus" >&2; exit 1; }
	SUDO=sudo
fi

echo "ensure-prometheus: installing Debian's prometheus with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends prometheus
command -v prometheus >/dev/null 2>&1 || { echo "ensure-prometheus: apt-get finished but prometheus is still not on PATH" >&2; exit 1; }
