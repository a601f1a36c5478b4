#!/usr/bin/env bash
# Installs a Java runtime for PySpark (the analytics jobs and their tests) from Debian's
# openjdk-17-jre-headless package when `java` is missing. PySpark 4 needs Java 17 or 21.
#
# Idempotent: does nothing when `java` is already on PATH (or JAVA_HOME has one). Runs apt-get as
# root, or through `sudo -n` when not root.
set -euo pipefail

if command -v java >/dev/null 2>&1 || { [ -n "${JAVA_HOME:-}" ] && [ -x "${JAVA_HOME}/bin/java" ]; }; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-java: java is missing and this user can neither apt-get nor sudo;" >&2
    echo "install-java: run 'apt-get install openjdk-17-jre-headless' as root (Debian/Ubuntu)" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-java: no apt-get here; install a Java 17 runtime by hand (PySpark needs it)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null

java -version 2>&1 | sed -n 1p
