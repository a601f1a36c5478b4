#!/usr/bin/env bash
# Installs the pinned Apache RocketMQ jars the real-thing tests and benchmarks run
# (tests/rocketmq_support.py): one Maven project per version in tests/rocketmq/<name>/pom.xml,
# its dependencies copied into build/rocketmq/<name>/lib by `mvn dependency:copy-dependencies`.
#
#   5.5.0        NameServer, broker, proxy, mqadmin, remoting client (newest 5.x Maven Central serves whole)
#   4.9.7        NameServer, broker, mqadmin, remoting client (4.9.8's broker/namesrv are not on Maven Central)
#   client-java  rocketmq-client-java 5.0.8, the RocketMQ 5 gRPC client
#
# Idempotent: a lib directory is stamped with the sha256 of its pom and not touched again while the
# pom is unchanged. Cached twice: the lib directory in a build cache outside the checkout
# ($NAMESRV_BUILD_CACHE, default ~/.cache/namesrv-grpc/rocketmq/<name>-<pom sha256>), copied into a
# new clone without starting Maven; below it Maven's local repository (~/.m2, or
# MAVEN_OPTS/-Dmaven.repo.local), shared by every checkout. Offline-safe: `mvn -o` is tried first, so once the jars are in the local
# repository no network is needed. Installs Debian's maven and openjdk-17-jdk-headless when mvn or javac is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
POMS="$ROOT/tests/rocketmq"
DEST="$ROOT/build/rocketmq"
NAMES=("5.5.0" "4.9.7" "client-java")
CACHE="${NAMESRV_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/namesrv-grpc}/rocketmq"

# Maven and a JDK (javac compiles the tests' small Java programs) from Debian's packages when missing.
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "install-rocketmq: mvn or javac is missing and this user can neither apt-get nor sudo;" >&2
        echo "install-rocketmq: run 'apt-get install maven openjdk-17-jdk-headless' as root" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-rocketmq: no apt-get here; install Maven 3 and a JDK 17 by hand" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends maven openjdk-17-jdk-headless >/dev/null
fi

# keep_in_cache LIB CACHED: copy LIB into the build cache as CACHED/lib unless it is there: copied
# aside, then renamed (two checkouts at once never leave half of one).
keep_in_cache() {
    [ -d "$2/lib" ] && return 0
    mkdir -p "$CACHE"
    rm -rf "$2.$$"
    mkdir -p "$2.$$"
    if cp -a "$1" "$2.$$/lib" && mv -T "$2.$$" "$2" 2>/dev/null; then :; else rm -rf "$2.$$"; fi
}

for name in "${NAMES[@]}"; do
    pom="$POMS/$name/pom.xml"
    lib="$DEST/$name/lib"
    stamp="$DEST/$name/.installed"
    hash="$(sha256sum "$pom" | cut -d' ' -f1)"
    cached="$CACHE/$name-$hash"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] && [ -d "$lib" ]; then
        keep_in_cache "$lib" "$cached"
        continue
    fi
    rm -rf "$lib" "$stamp"
    if [ -d "$cached/lib" ]; then
        mkdir -p "$DEST/$name"
        cp -a "$cached/lib" "$lib"
        echo "$hash" >"$stamp"
        echo "install-rocketmq: $name -> $lib ($(find "$lib" -name '*.jar' | wc -l) jars, from the build cache $cached)"
        continue
    fi
    mkdir -p "$lib"
    args=(-B -q -f "$pom" dependency:copy-dependencies "-DoutputDirectory=$lib" -DincludeScope=runtime)
    if ! mvn -o "${args[@]}" >/dev/null 2>&1; then
        echo "install-rocketmq: fetching $name from Maven Central (once; cached in the local Maven repository)" >&2
        rm -rf "$lib"
        mkdir -p "$lib"
        mvn "${args[@]}"
    fi
    # A build/ directory of the pom's project is the only other thing Maven may leave behind.
    rm -rf "$POMS/$name/target"
    echo "$hash" >"$stamp"
    echo "install-rocketmq: $name -> $lib ($(find "$lib" -name '*.jar' | wc -l) jars)"
    keep_in_cache "$lib" "$cached"
done
