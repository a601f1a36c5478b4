#!/usr/bin/env bash
# Builds the example clients of examples/clients/ (Go, Java, TypeScript) from protos/, for
# `make clients` and `make test` (tests/test_example_clients.py runs them).
#
# 1. the code generators at pinned versions, local only, in build/clients/bin: protoc-gen-go and
#    protoc-gen-go-grpc (go install), protoc and protoc-gen-grpc-java (Maven Central artifacts, the
#    versions of examples/clients/java/pom.xml), protoc-gen-es (examples/clients/ts/package-lock.json);
# 2. `buf generate` with buf.gen.yaml (every run: a changed contract reaches every example);
# 3. go build, mvn package, tsc.
#
# Idempotent; the caches are the usual shared ones (Go module and build cache, ~/.m2, ~/.npm), so a
# second run downloads nothing. Needs go, java + mvn, node + npm (the machine's toolchains).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/build/clients"
BIN="$OUT/bin"
BUF="npx --yes @bufbuild/buf@1.75.0"
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.1
JAVA_DIR="$ROOT/examples/clients/java"
TS_DIR="$ROOT/examples/clients/ts"
GO_DIR="$ROOT/examples/clients/go"
mkdir -p "$BIN"

for tool in go java mvn node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-clients: $tool is missing (Go >= 1.24, JDK 17 + Maven, Node.js >= 20 + npm)" >&2
        exit 1
    fi
done

step() { printf 'install-clients: %s (%s)\n' "$1" "$(date -u +%T)"; }

# 1. Generators. A stamp per pinned version: a changed pin installs again.
if [ ! -f "$BIN/.protoc-gen-go-$PROTOC_GEN_GO" ] || [ ! -f "$BIN/.protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC" ]; then
    step "go install protoc-gen-go@$PROTOC_GEN_GO protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
    GOBIN="$BIN" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
    GOBIN="$BIN" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
    rm -f "$BIN"/.protoc-gen-go-*
    touch "$BIN/.protoc-gen-go-$PROTOC_GEN_GO" "$BIN/.protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC"
fi

pom_property() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$JAVA_DIR/pom.xml" | head -n 1; }
PROTOBUF_VERSION="$(pom_property protobuf.version)"
GRPC_VERSION="$(pom_property grpc.version)"
case "$(uname -m)" in
    x86_64 | amd64) CLASSIFIER=linux-x86_64 ;;
    aarch64 | arm64) CLASSIFIER=linux-aarch_64 ;;
    *) echo "install-clients: no protoc on Maven Central for $(uname -m)" >&2; exit 1 ;;
esac
maven_exe() { # GROUP:ARTIFACT:VERSION NAME: copy an executable artifact from Maven Central to $BIN/NAME
    local stamp="$BIN/.$2-$(echo "$1" | tr ':' '_')"
    [ -f "$stamp" ] && [ -x "$BIN/$2" ] && return 0
    step "maven $1:exe:$CLASSIFIER"
    local tmp
    tmp="$(mktemp -d)"
    mvn -B -q dependency:copy -Dartifact="$1:exe:$CLASSIFIER" -DoutputDirectory="$tmp" -Dmdep.stripVersion=true
    install -m 0755 "$tmp"/*.exe "$BIN/$2"
    rm -rf "$tmp"
    rm -f "$BIN/.$2-"*
    touch "$stamp"
}
maven_exe "com.google.protobuf:protoc:$PROTOBUF_VERSION" protoc
maven_exe "io.grpc:protoc-gen-grpc-java:$GRPC_VERSION" protoc-gen-grpc-java

if [ ! -f "$TS_DIR/node_modules/.package-lock.json" ] || [ "$TS_DIR/package-lock.json" -nt "$TS_DIR/node_modules/.package-lock.json" ]; then
    step "npm ci (examples/clients/ts)"
    (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi

# 2. Generated code, from scratch (a removed .proto file leaves nothing behind), whenever the
#    contract, buf.gen.yaml or a generator changed since the last run (else the builds below have
#    nothing to recompile).
INPUTS="$( (cd "$ROOT" && find protos -name '*.proto' -print0 | sort -z | xargs -0 sha256sum; sha256sum buf.gen.yaml; \
    ls "$BIN"/.protoc-gen-* "$BIN"/.protoc-* "$TS_DIR/package-lock.json") | sha256sum | cut -d' ' -f1)"
GEN_STAMP="$OUT/.generated-$INPUTS"
if [ ! -f "$GEN_STAMP" ] || [ ! -d "$GO_DIR/gen" ] || [ ! -d "$JAVA_DIR/gen" ] || [ ! -d "$TS_DIR/src/gen" ]; then
    step "buf generate"
    rm -rf "$GO_DIR/gen" "$JAVA_DIR/gen" "$TS_DIR/src/gen" "$OUT"/.generated-*
    (cd "$ROOT" && $BUF generate)
    touch "$GEN_STAMP"
fi

# 3. The programs.
step "go build (examples/clients/go)"
(cd "$GO_DIR" && go build -o "$OUT/namesrv-client-go" .)
step "mvn package (examples/clients/java)"
(cd "$JAVA_DIR" && mvn -B -q package)
step "tsc (examples/clients/ts)"
(cd "$TS_DIR" && npm run --silent build)
step "done: $OUT/namesrv-client-go, $JAVA_DIR/target/namesrv-client.jar, $TS_DIR/dist/main.js"
