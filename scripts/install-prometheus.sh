#!/usr/bin/env bash
# Installs Prometheus and promtool from Debian's `prometheus` package when promtool is missing.
#
# Idempotent: does nothing when `promtool` and `prometheus` are already on PATH. Runs apt-get as
# root, or through `sudo -n` when not root. The tests start their own Prometheus (own config, port
# and storage directory) and never use a system service, so this script keeps the package's
# service from starting on install (a policy-rc.d that says "no", only while apt-get runs and only
# when the machine has none of its own).
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-prometheus: promtool is missing and this user can neither apt-get nor sudo;" >&2
    echo "install-prometheus: run 'apt-get install prometheus' as root (Debian/Ubuntu)" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-prometheus: no apt-get here; install Prometheus >= 2.37 (prometheus, promtool) by hand" >&2
    exit 1
fi

POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
    # shellcheck disable=SC2016
    "${SUDO[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    trap '"${SUDO[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null

promtool --version 2>&1 | sed -n 1p
