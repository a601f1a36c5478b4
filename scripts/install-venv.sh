#!/usr/bin/env bash
# The project's virtual environment: `install-venv.sh VENV PYTHON` installs the project into VENV,
# editable, with the dev extra.
#
# An existing VENV is updated in place (pip). A new one is a copy of a prepared environment kept in
# the build cache outside the checkout ($NAMESRV_BUILD_CACHE, default ~/.cache/namesrv-grpc/venv/
# <sha256 of pyproject.toml and the Python>), shared by every clone: every dependency installed and
# compiled (the environment is ~1.1 GB, pyspark's jars most of it; pip unpacks it in ~37 s on the
# test machine), copied as hard links in seconds; then the scripts in bin/ are pointed at the copy
# and the project itself is installed editable (docs/development.md). When the prepared environment
# is missing it is made first (pip, from the package index) and then copied. It is complete or
# absent: it is made beside and renamed into place; pip's environments can be moved, their scripts'
# first lines aside.
set -euo pipefail

VENV="$1"
PYTHON="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${NAMESRV_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/namesrv-grpc}/venv"

step() { echo "install-venv: $*"; }
pip_in() { "$1/bin/python" -m pip --disable-pip-version-check "${@:2}"; }

if [ -x "$VENV/bin/python" ]; then
    pip_in "$VENV" install --quiet --no-compile -e "$ROOT[dev]"
    exit 0
fi
if [ -e "$VENV" ]; then  # refused before any prepared environment is made for it
    echo "install-venv: $VENV exists but has no bin/python; remove it and run again" >&2
    exit 1
fi

WHICH="$("$PYTHON" -c 'import sys, sysconfig; print(f"{sys.version.split()[0]}-{sysconfig.get_platform()}-{sys.base_prefix}")' | tr '/' '_')"
KEY="$( (cat "$ROOT/pyproject.toml"; echo "$WHICH") | sha256sum | cut -c1-16)"
PREPARED="$CACHE/$KEY"

if [ ! -x "$PREPARED/bin/python" ]; then
    step "no prepared environment for this pyproject.toml yet: making $PREPARED"
    mkdir -p "$CACHE"
    tmp="$CACHE/.$KEY.$$"
    trap 'rm -rf "$tmp"' EXIT
    "$PYTHON" -m venv "$tmp"
    pip_in "$tmp" install --quiet --upgrade pip "setuptools>=77" wheel
    pip_in "$tmp" install --quiet --no-compile -e "$ROOT[dev]"
    pip_in "$tmp" uninstall --quiet --yes namesrv-grpc  # the project comes from each checkout
    # Compiled once here, so a copy starts with every dependency's modules compiled (its own
    # __pycache__/ files are hard links too; a module's code is given its path when loaded).
    # compileall exits 1 when some file does not compile (test data of a package): those stay as
    # they are, compiled on first import if ever imported.
    "$tmp/bin/python" -m compileall -q -j0 "$tmp/lib" >/dev/null || true
    mv -T "$tmp" "$PREPARED" 2>/dev/null || rm -rf "$tmp"  # another clone may have been quicker
    trap - EXIT
fi

mkdir -p "$(dirname "$VENV")"
cp -al "$PREPARED" "$VENV" 2>/dev/null || { rm -rf "$VENV"; cp -a "$PREPARED" "$VENV"; }  # hard links need one file system
NEW="$(cd "$VENV" && pwd)"
OLD="$(sed -n 's/^VIRTUAL_ENV=.\(.*\).$/\1/p' "$PREPARED/bin/activate" | head -n 1)"
# Scripts name their interpreter by the prepared environment's path: the copy's own (sed -i
# writes a new file, so the prepared one keeps its text).
for script in "$VENV"/bin/*; do
    if [ -f "$script" ] && [ ! -L "$script" ] && grep -Iq . "$script" && grep -q "$OLD" "$script"; then
        sed -i "s|$OLD|$NEW|g" "$script"
    fi
done
pip_in "$VENV" install --quiet --no-compile --no-deps --no-build-isolation -e "$ROOT"
step "$VENV: a copy of $PREPARED, the project installed editable"
