#!/usr/bin/env bash
# Installs libfaketime from Debian's `faketime` package when it is missing: the test of a wall-clock
# step (tests/test_watchdog.py) runs namesrv with it preloaded.
#
# Idempotent: does nothing when the library is there. Runs apt-get as root, or through `sudo -n`.
set -euo pipefail

LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
if [ -e "$LIB" ] || [ -e "${LIB/x86_64/aarch64}" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-faketime: libfaketime is missing and this user can neither apt-get nor sudo;" >&2
    echo "install-faketime: run 'apt-get install faketime' as root (Debian/Ubuntu)" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-faketime: no apt-get here; install libfaketime by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends faketime >/dev/null
echo "install-faketime: $(dpkg-query -W -f '${Package} ${Version}' libfaketime)"
