#!/usr/bin/env bash
# Runs Apache RocketMQ's own programs from the jars `make rocketmq` installs
# (build/rocketmq/<version>/lib), with the JVM flags JDK 17 needs, against our NameServer or any
# other: docs/rocketmq-local.md shows a broker, mqadmin and a producer this way.
#
#   scripts/rocketmq.sh [-v VERSION] namesrv|broker|proxy|mqadmin ARGS...
#
# VERSION: 5.5.0 (default) or 4.9.7. JAVA_HEAP (default "-Xms256m -Xmx256m") sets the heap;
# JAVA_OPTS adds flags. ROCKETMQ_HOME defaults to build/rocketmq/<version>/home (4.x reads its
# logging configuration there; 5.x carries its own in its jars). Exit code: the program's.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION=5.5.0
if [ "${1:-}" = "-v" ]; then
    VERSION="${2:?scripts/rocketmq.sh: -v needs a version (5.5.0 or 4.9.7)}"
    shift 2
fi
PROGRAM="${1:-}"
[ $# -gt 0 ] && shift
case "$PROGRAM" in
    namesrv) MAIN=org.apache.rocketmq.namesrv.NamesrvStartup LOGBACK=namesrv ;;
    broker) MAIN=org.apache.rocketmq.broker.BrokerStartup LOGBACK=broker ;;
    proxy) MAIN=org.apache.rocketmq.proxy.ProxyStartup LOGBACK=proxy ;;
    mqadmin) MAIN=org.apache.rocketmq.tools.command.MQAdminStartup LOGBACK=tools ;;
    *)
        echo "usage: scripts/rocketmq.sh [-v VERSION] namesrv|broker|proxy|mqadmin ARGS..." >&2
        exit 2
        ;;
esac
LIB="$ROOT/build/rocketmq/$VERSION/lib"
if ! compgen -G "$LIB/*.jar" >/dev/null; then
    echo "scripts/rocketmq.sh: no RocketMQ $VERSION jars in $LIB: run make rocketmq" >&2
    exit 1
fi
export ROCKETMQ_HOME="${ROCKETMQ_HOME:-$ROOT/build/rocketmq/$VERSION/home}"
mkdir -p "$ROCKETMQ_HOME/conf"
# JDK 17: RocketMQ reaches into NIO buffers for its memory-mapped store (and Netty into sun.nio.ch).
JDK17_FLAGS=(
    --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-opens=java.base/java.nio=ALL-UNNAMED
    --add-opens=java.base/java.util=ALL-UNNAMED
    --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --add-exports=java.base/sun.nio.ch=ALL-UNNAMED
)
# shellcheck disable=SC2086 # JAVA_HEAP and JAVA_OPTS are lists of flags
exec java ${JAVA_HEAP:--Xms256m -Xmx256m} "${JDK17_FLAGS[@]}" ${JAVA_OPTS:-} \
    -Drmq.logback.configurationFile="rmq.$LOGBACK.logback.xml" -Drocketmq.home.dir="$ROCKETMQ_HOME" \
    -cp "$LIB/*" "$MAIN" "$@"
