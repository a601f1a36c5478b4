#!/usr/bin/env bash
# Installs the load generator and the peer of `make bench`, when missing: h2load (Debian's
# nghttp2-client, a C-speed HTTP/2 client) and etcd (Debian's etcd-server, the key-value store whose
# gRPC `KV/Range` read the lookup benchmark compares against). Idempotent; apt-get as root or
# through `sudo -n`.
set -euo pipefail
missing=()
command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-bench-tools: missing ${missing[*]}; run 'apt-get install ${missing[*]}' as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# The package names differ between releases only in theory; check them before installing.
for package in "${missing[@]}"; do
    if ! apt-cache show "$package" >/dev/null 2>&1; then
        echo "install-bench-tools: apt has no package '$package' on this system" >&2
        exit 1
    fi
done
# Debian's etcd-server starts a system etcd on 2379 when a service manager runs; the benchmark
# starts its own etcd on free ports and never uses it.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
h2load --version | sed -n 1p
etcd --version | sed -n 1p
