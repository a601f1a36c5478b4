#!/usr/bin/env bash
# Installs what `make image` and `make image-test` need from Debian's packages when missing:
# podman, runc (the OCI runtime used here: crun fails on hosts with hybrid cgroups), debootstrap
# (the local base image), uidmap, slirp4netns and fuse-overlayfs (podman's networking and storage
# helpers), the CNI dnsname plugin (container names resolve on compose networks) and catatonit
# (pods' infra containers, `podman kube play`), systemd's systemd-analyze (the deploy/systemd/ units'
# check), then writes the project's containers.conf.
#
#   bash scripts/install-podman.sh [CONTAINERS_CONF]   (default: build/containers.conf)
#
# The containers.conf it writes clears podman's default ulimits (podman otherwise asks for an
# RLIMIT_NOFILE above a host's hard limit and the container fails with "setrlimit: Operation not
# permitted") and uses the cgroupfs cgroup manager (no systemd here). The make targets point
# CONTAINERS_CONF at it and pass `--runtime runc`; nothing outside build/ is configured.
#
# Idempotent: installs only the missing commands. Runs apt-get as root, or through `sudo -n`.
set -euo pipefail

CONF=${1:-build/containers.conf}

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
command -v fuse-overlayfs >/dev/null 2>&1 || missing+=(fuse-overlayfs)
# Name resolution between containers of one network (CNI networks of podman 4.3: compose
# service names such as namesrv-1).
[ -x /usr/lib/cni/dnsname ] || missing+=(golang-github-containernetworking-plugin-dnsname)
# The pause process of pods' infra containers (`podman kube play`).
[ -x /usr/bin/catatonit ] || [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
# systemd-analyze: tests/test_deploy.py verifies the units of deploy/systemd/ (systemd need not run).
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "install-podman: missing ${missing[*]} and this user can neither apt-get nor sudo;" >&2
        echo "install-podman: run 'apt-get install ${missing[*]}' as root (Debian/Ubuntu)" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-podman: no apt-get here; install ${missing[*]} by hand" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    podman --version
fi

mkdir -p "$(dirname "$CONF")"
cat >"$CONF.tmp" <<'CONF'
# Written by scripts/install-podman.sh; used through CONTAINERS_CONF by `make image` / `image-test`.
[containers]
# No default ulimits: podman's defaults exceed some hosts' hard RLIMIT_NOFILE ("setrlimit:
# Operation not permitted"); containers inherit the engine's limits instead.
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
mv "$CONF.tmp" "$CONF"
