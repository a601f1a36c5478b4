#!/usr/bin/env bash
# Builds the container images namesrv-grpc:dev and namesrv-grpc:dev-snapshots (the same plus pyarrow,
# the snapshots extra) with podman, without any image registry or package index inside the build
# (`make image` runs it; scripts/install-podman.sh first):
#
#   1. base image localhost/debian:bookworm: `debootstrap --variant=minbase bookworm` from the
#      Debian mirror apt already uses here (read from /etc/apt/sources.list{,.d}; DEBIAN_MIRROR
#      overrides it), trimmed like Debian's slim images, `podman import`ed. The root file system is
#      kept as build/base/debian-bookworm.tar and imported again from there when podman lost it.
#   2. wheelhouse build/wheelhouse: project/ the project's wheel (from this tree, rebuilt every
#      time), deps/ wheels of its runtime dependencies (no extras), extras/ the wheels the
#      snapshots extra adds (pyarrow), for the image's Python, Debian bookworm's CPython 3.11 with
#      glibc 2.36, this machine's architecture. Downloaded again only when pyproject.toml changes.
#   3. podman build -f deploy/Dockerfile --build-arg BASE_IMAGE=localhost/debian:bookworm
#      --build-arg PACKAGES=wheelhouse: Debian's python3 (apt inside the build), the wheels; once
#      as $IMAGE (EXTRAS empty: no pyarrow) and once as $IMAGE-snapshots (EXTRAS=snapshots). The
#      second shares every layer up to the extra's with the first. Each image's size is printed.
#
#   bash scripts/build-image.sh [PYTHON]     (PYTHON runs pip outside the image; default python3)
#   bash scripts/build-image.sh --apt-mirror SUITE   (prints the mirror step 1 would use, or nothing)
#
# Environment: IMAGE (default namesrv-grpc:dev), VARIANTS (default "default snapshots": which of the
# two images to build), CONTAINERS_CONF (default build/containers.conf), DEBIAN_MIRROR,
# DEBIAN_SECURITY_MIRROR, APT_ETC (default /etc/apt: where apt's sources are).
# Needs root for debootstrap (rootful podman, as here).
set -euo pipefail

APT_ETC=${APT_ETC:-/etc/apt}
IMAGE=${IMAGE:-namesrv-grpc:dev}
VARIANTS=${VARIANTS:-default snapshots}
BASE=localhost/debian:bookworm
BUILD=build
BASE_TAR=$BUILD/base/debian-bookworm.tar
WHEELHOUSE=$BUILD/wheelhouse
# The image's Python: Debian bookworm's python3 (3.11, glibc 2.36).
IMAGE_PYTHON_VERSION=3.11
IMAGE_GLIBC_MINOR=36
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/$BUILD/containers.conf}
PODMAN=(podman --runtime runc)

START=$(date +%s)
step() { echo "build-image [$(($(date +%s) - START))s] $*"; }

# The first URI of a `deb` source for SUITE in apt's sources (one-line and deb822 formats).
apt_mirror() {
    local suite=$1 found
    found=$({
        cat "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list 2>/dev/null \
            | awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                                              if ($(i + 1) == s) { print $i; exit } }'
        for file in "$APT_ETC"/sources.list.d/*.sources; do
            [ -e "$file" ] || continue
            awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
                { types = ""; uri = ""; found = 0
                  for (n = 1; n <= NF; n++) {
                      split($n, kv, ":[ \t]*"); key = kv[1]; value = substr($n, length(key) + 2)
                      gsub(/^[ \t]+/, "", value)
                      if (key == "Types") types = value
                      if (key == "URIs") { split(value, uris, /[ \t]+/); uri = uris[1] }
                      if (key == "Suites") { m = split(value, suites, /[ \t]+/)
                                             for (k = 1; k <= m; k++) if (suites[k] == s) found = 1 }
                  }
                  if (found && types ~ /(^|[ \t])deb([ \t]|$)/ && uri != "") { print uri; exit } }' "$file"
        done
    } || true)
    [ -z "$found" ] || printf '%s\n' "${found%%$'\n'*}"
}

if [ "${1:-}" = "--apt-mirror" ]; then
    apt_mirror "${2:?--apt-mirror SUITE}"
    exit 0
fi
PYTHON=${1:-python3}

# --- 1. the base image ------------------------------------------------------------------------------
if "${PODMAN[@]}" image exists "$BASE"; then
    step "base image $BASE present"
else
    if [ ! -s "$BASE_TAR" ]; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "build-image: debootstrap needs root (the base image $BASE is made locally)" >&2
            exit 1
        fi
        MIRROR=${DEBIAN_MIRROR:-$(apt_mirror bookworm)}
        MIRROR=${MIRROR:-http://deb.debian.org/debian}
        SECURITY=${DEBIAN_SECURITY_MIRROR:-$(apt_mirror bookworm-security)}
        SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
        ROOTFS=$BUILD/base/rootfs
        rm -rf "$ROOTFS"
        mkdir -p "$ROOTFS"
        step "debootstrap --variant=minbase bookworm $ROOTFS $MIRROR (log: $BUILD/base/debootstrap.log)"
        if ! debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$BUILD/base/debootstrap.log" 2>&1; then
            tail -n 20 "$BUILD/base/debootstrap.log" >&2
            exit 1
        fi
        # As Debian's slim images: no documentation, manual pages or translations (copyright
        # files stay); no apt lists or package caches in the image.
        cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/01-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
EOF
        find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
        find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete
        rm -rf "$ROOTFS"/usr/share/{man,info,locale,groff,lintian,linda}/* \
            "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
            "$ROOTFS"/var/log/*.log "$ROOTFS"/var/log/apt/*
        cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
        tar --numeric-owner -C "$ROOTFS" -cf "$BASE_TAR.tmp" .
        mv "$BASE_TAR.tmp" "$BASE_TAR"
        rm -rf "$ROOTFS"
    fi
    step "podman import $BASE_TAR $BASE"
    "${PODMAN[@]}" import --quiet --change 'CMD ["/bin/bash"]' "$BASE_TAR" "$BASE" >/dev/null
fi

# --- 2. the wheelhouse ------------------------------------------------------------------------------
ARCH=$(uname -m)
PLATFORMS=()
for minor in $(seq "$IMAGE_GLIBC_MINOR" -1 17); do
    PLATFORMS+=(--platform "manylinux_2_${minor}_${ARCH}")
done
PLATFORMS+=(--platform "manylinux2014_${ARCH}")
KEY=$({ cat pyproject.toml; echo "$IMAGE_PYTHON_VERSION ${PLATFORMS[*]}"; } | sha256sum | cut -d' ' -f1)

# The project's wheel, reproducible (zip timestamps from SOURCE_DATE_EPOCH) so that an unchanged
# tree gives the same bytes and podman's layer cache holds.
step "pip wheel --no-deps . -> $WHEELHOUSE/project"
rm -rf "$WHEELHOUSE/project"
SOURCE_DATE_EPOCH=315532800 "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation \
    --wheel-dir "$WHEELHOUSE/project" .

# pip download REQUIREMENT DIR: the wheels of REQUIREMENT and its dependencies for the image's Python.
download() {
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
        --implementation cp --python-version "$IMAGE_PYTHON_VERSION" --abi "cp${IMAGE_PYTHON_VERSION/./}" \
        --abi abi3 --abi none "${PLATFORMS[@]}" --dest "$2" "$1"
}
PROJECT_WHEEL=$(echo "$WHEELHOUSE"/project/*.whl)
if [ "$(cat "$WHEELHOUSE/deps/.key" 2>/dev/null)" = "$KEY" ] && [ "$(cat "$WHEELHOUSE/extras/.key" 2>/dev/null)" = "$KEY" ]; then
    step "dependency wheels present ($(find "$WHEELHOUSE/deps" -name '*.whl' | wc -l) in $WHEELHOUSE/deps," \
        "$(find "$WHEELHOUSE/extras" -name '*.whl' | wc -l) in $WHEELHOUSE/extras)"
else
    step "pip download: runtime dependencies for CPython $IMAGE_PYTHON_VERSION, manylinux_2_$IMAGE_GLIBC_MINOR $ARCH"
    rm -rf "$WHEELHOUSE/deps" "$WHEELHOUSE/extras" "$WHEELHOUSE/deps.tmp" "$WHEELHOUSE/extras.tmp"
    mkdir -p "$WHEELHOUSE/deps.tmp" "$WHEELHOUSE/extras.tmp"
    download "$PROJECT_WHEEL" "$WHEELHOUSE/deps.tmp"
    rm -f "$WHEELHOUSE"/deps.tmp/namesrv_grpc-*.whl
    # The snapshots extra: what `project[snapshots]` needs beyond deps/.
    download "$PROJECT_WHEEL[snapshots]" "$WHEELHOUSE/extras.tmp"
    rm -f "$WHEELHOUSE"/extras.tmp/namesrv_grpc-*.whl
    for wheel in "$WHEELHOUSE"/extras.tmp/*.whl; do
        if [ -e "$WHEELHOUSE/deps.tmp/$(basename "$wheel")" ]; then
            rm -f "$wheel"
        fi
    done
    echo "$KEY" >"$WHEELHOUSE/deps.tmp/.key"
    echo "$KEY" >"$WHEELHOUSE/extras.tmp/.key"
    mv "$WHEELHOUSE/deps.tmp" "$WHEELHOUSE/deps"
    mv "$WHEELHOUSE/extras.tmp" "$WHEELHOUSE/extras"
    step "$(find "$WHEELHOUSE/deps" -name '*.whl' | wc -l) dependency wheels, $(du -sh "$WHEELHOUSE/deps" | cut -f1);" \
        "snapshots extra: $(cd "$WHEELHOUSE/extras" && ls -- *.whl | tr '\n' ' ')$(du -sh "$WHEELHOUSE/extras" | cut -f1)"
fi

# --- 3. the images ----------------------------------------------------------------------------------
for variant in $VARIANTS; do
    case "$variant" in
        default) tag=$IMAGE extras= ;;
        snapshots) tag=$IMAGE-snapshots extras=snapshots ;;
        *) echo "build-image: VARIANTS: unknown variant $variant (default, snapshots)" >&2; exit 2 ;;
    esac
    step "podman build -f deploy/Dockerfile -t $tag (BASE_IMAGE=$BASE, PACKAGES=wheelhouse, EXTRAS=$extras)"
    "${PODMAN[@]}" build --layers --format docker \
        --file deploy/Dockerfile --ignorefile deploy/Dockerfile.dockerignore \
        --build-arg "BASE_IMAGE=$BASE" --build-arg PACKAGES=wheelhouse --build-arg "EXTRAS=$extras" \
        --tag "$tag" .
    SIZE=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$tag")
    step "built $tag: $((SIZE / 1000000)) MB"
done
