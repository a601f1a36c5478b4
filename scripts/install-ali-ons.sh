#!/usr/bin/env bash
# Installs npm's ali-ons (a pure JavaScript RocketMQ remoting client, independent of this project)
# into build/node/, for tests/test_remoting_ali_ons.py. Pinned version; idempotent; needs node + npm.
set -euo pipefail
VERSION=3.12.0
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="$ROOT/build/node"
PACKAGE_JSON="$PREFIX/node_modules/ali-ons/package.json"
if [ -f "$PACKAGE_JSON" ] && grep -q "\"version\": \"$VERSION\"" "$PACKAGE_JSON"; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "install-ali-ons: npm is missing; install Node.js 18+ (Debian: apt-get install nodejs npm)" >&2
    exit 1
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "ali-ons@$VERSION"
echo "ali-ons $VERSION installed in $PREFIX"
