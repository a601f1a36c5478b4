#!/usr/bin/env bash
# Installs h2load (Debian's nghttp2-client), the C-speed HTTP/2 load generator of `make bench`,
# when it is missing. Idempotent; apt-get as root or through `sudo -n`.
set -euo pipefail
command -v h2load >/dev/null 2>&1 && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif sudo -n true 2>/dev/null; then SUDO=(sudo -n); else
    echo "install-bench-tools: h2load is missing; run 'apt-get install nghttp2-client' as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends nghttp2-client >/dev/null
h2load --version | head -n 1
