#!/usr/bin/env bash
# Builds the example clients of examples/clients/ (Go, Java, TypeScript) from protos/, for
# `make clients` and `make test` (tests/test_example_clients.py runs them).
#
# 1. the code generators at pinned versions, local only, in build/clients/bin: protoc-gen-go and
#    protoc-gen-go-grpc (go install), protoc and protoc-gen-grpc-java (Maven Central artifacts, the
#    versions of examples/clients/java/pom.xml), protoc-gen-es (examples/clients/ts/package-lock.json);
# 2. `buf generate` with buf.gen.yaml, from scratch;
# 3. go build, mvn package, tsc.
#
# Each step runs only when its inputs or its outputs changed since it last succeeded: a stamp per
# step in build/clients/stamps holds the key it ran with (the pinned versions, the SHA-256 of its
# input files, the toolchain's version) and the SHA-256 of the outputs it left (so outputs that are
# missing, or were rebuilt by hand or by an older version of this script, are made again). A second run with
# nothing changed runs no step, prints "up to date, skipped" for each and touches no file; a changed
# .proto file regenerates the code of all three, and a changed Go, Java or TypeScript source rebuilds
# that program alone. A step's outputs are also kept in a build cache outside the checkout
# ($NAMESRV_BUILD_CACHE, default ~/.cache/namesrv-grpc/clients; one tar per step and key), so a new
# clone, or this one after `make clean`, restores what an earlier run built from the same inputs
# instead of building it again. Below that, the usual shared caches (Go module and build cache,
# ~/.m2, ~/.npm): a run downloads only what a pin that changed needs. Needs go, java + mvn, node + npm
# (the machine's toolchains).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/build/clients"
BIN="$OUT/bin"
STAMPS="$OUT/stamps"
CACHE="${NAMESRV_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/namesrv-grpc}/clients"
BUF="npx --yes @bufbuild/buf@1.75.0"
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.1
JAVA_DIR="$ROOT/examples/clients/java"
TS_DIR="$ROOT/examples/clients/ts"
GO_DIR="$ROOT/examples/clients/go"
mkdir -p "$BIN" "$STAMPS"
# Stamps of earlier versions of this script (they shared one name prefix, so one step's cleanup
# removed another's stamps).
rm -f "$BIN"/.protoc-* "$OUT"/.generated-*

for tool in go java mvn node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-clients: $tool is missing (Go >= 1.24, JDK 17 + Maven, Node.js >= 20 + npm)" >&2
        exit 1
    fi
done

STARTED=$SECONDS
RAN=0
step() { printf 'install-clients: %s (%s)\n' "$1" "$(date -u +%T)"; RAN=$((RAN + 1)); }

# files_hash PATH...: SHA-256 over the names and contents of the files under PATHs (relative to the
# current directory), in a fixed order; a touched but unchanged file keeps the hash.
files_hash() {
    find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64
}

# stamp KEY OUTPUT...: what a step's stamp holds: KEY, then the hash of its OUTPUTs (files or
# directories; "missing" when one is).
stamp() {
    local key="$1"
    shift
    printf '%s\n' "$key"
    for output in "$@"; do
        [ -e "$output" ] || { echo missing; return 0; }
    done
    files_hash "$@"
}

# up_to_date NAME KEY OUTPUT...: true (and says so) when step NAME last succeeded with KEY and left
# its OUTPUTs as they are now.
up_to_date() {
    local name="$1"
    shift
    [ -f "$STAMPS/$name" ] && [ "$(cat "$STAMPS/$name")" = "$(stamp "$@")" ] || return 1
    printf 'install-clients: %s: up to date, skipped\n' "$name"
}

# ran NAME KEY OUTPUT...: step NAME succeeded with KEY, leaving OUTPUTs.
ran() {
    local name="$1"
    shift
    stamp "$@" >"$STAMPS/$name"
}

# cache_file NAME KEY: the build cache's tar of step NAME run with KEY.
cache_file() {
    printf '%s/%s-%s.tar' "$CACHE" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-32)"
}

# restore NAME KEY PATH...: true when the build cache holds what step NAME left with KEY; then its
# PATHs (under the checkout) are replaced by the cached ones.
restore() {
    local name="$1" tar
    tar="$(cache_file "$1" "$2")"
    shift 2
    [ -f "$tar" ] || return 1
    rm -rf "$@"
    tar -C "$ROOT" -xf "$tar" || return 1
    printf 'install-clients: %s: restored from the build cache (%s)\n' "$name" "$tar"
}

# save NAME KEY PATH...: keep the PATHs step NAME just made with KEY in the build cache (written
# aside and renamed, so that two checkouts building at once never leave half a tar).
save() {
    local tar relative=() path
    tar="$(cache_file "$1" "$2")"
    shift 2
    for path in "$@"; do relative+=("${path#"$ROOT"/}"); done
    mkdir -p "$CACHE"
    tar -C "$ROOT" -cf "$tar.$$" "${relative[@]}" && mv "$tar.$$" "$tar" || rm -f "$tar.$$"
}

# 1. Generators: a changed pin installs again.
KEY="protoc-gen-go@$PROTOC_GEN_GO protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
if ! up_to_date go-generators "$KEY" "$BIN/protoc-gen-go" "$BIN/protoc-gen-go-grpc"; then
    if ! restore go-generators "$KEY" "$BIN/protoc-gen-go" "$BIN/protoc-gen-go-grpc"; then
        step "go install protoc-gen-go@$PROTOC_GEN_GO protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
        GOBIN="$BIN" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
        GOBIN="$BIN" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
        save go-generators "$KEY" "$BIN/protoc-gen-go" "$BIN/protoc-gen-go-grpc"
    fi
    ran go-generators "$KEY" "$BIN/protoc-gen-go" "$BIN/protoc-gen-go-grpc"
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
    up_to_date "$2" "$1:exe:$CLASSIFIER" "$BIN/$2" && return 0
    if ! restore "$2" "$1:exe:$CLASSIFIER" "$BIN/$2"; then
        step "maven $1:exe:$CLASSIFIER"
        local tmp
        tmp="$(mktemp -d)"
        mvn -B -q dependency:copy -Dartifact="$1:exe:$CLASSIFIER" -DoutputDirectory="$tmp" -Dmdep.stripVersion=true
        install -m 0755 "$tmp"/*.exe "$BIN/$2"
        rm -rf "$tmp"
        save "$2" "$1:exe:$CLASSIFIER" "$BIN/$2"
    fi
    ran "$2" "$1:exe:$CLASSIFIER" "$BIN/$2"
}
maven_exe "com.google.protobuf:protoc:$PROTOBUF_VERSION" protoc
maven_exe "io.grpc:protoc-gen-grpc-java:$GRPC_VERSION" protoc-gen-grpc-java

KEY="$(cd "$TS_DIR" && files_hash package.json package-lock.json)"
if ! up_to_date npm-ci "$KEY" "$TS_DIR/node_modules/.package-lock.json"; then
    if ! restore npm-ci "$KEY" "$TS_DIR/node_modules"; then
        step "npm ci (examples/clients/ts)"
        (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
        save npm-ci "$KEY" "$TS_DIR/node_modules"
    fi
    ran npm-ci "$KEY" "$TS_DIR/node_modules/.package-lock.json"
fi

# 2. Generated code, from scratch (a removed .proto file leaves nothing behind), when the contract,
#    buf.gen.yaml, buf or a generator changed.
KEY="$(cd "$ROOT" && files_hash protos buf.gen.yaml) $BUF $(cat "$STAMPS/go-generators" "$STAMPS/protoc" \
    "$STAMPS/protoc-gen-grpc-java" "$STAMPS/npm-ci" | tr '\n' ' ')"
GEN=("$GO_DIR/gen" "$JAVA_DIR/gen" "$TS_DIR/src/gen")
if ! up_to_date buf-generate "$KEY" "${GEN[@]}"; then
    if ! restore buf-generate "$KEY" "${GEN[@]}"; then
        step "buf generate"
        rm -rf "${GEN[@]}"
        (cd "$ROOT" && $BUF generate)
        save buf-generate "$KEY" "${GEN[@]}"
    fi
    ran buf-generate "$KEY" "${GEN[@]}"
fi

# 3. The programs, each when its sources (its generated code included) or its toolchain changed.
KEY="$(cd "$GO_DIR" && files_hash ./*.go go.mod go.sum gen) $(go env GOVERSION)"
if ! up_to_date go-build "$KEY" "$OUT/namesrv-client-go"; then
    if ! restore go-build "$KEY" "$OUT/namesrv-client-go"; then
        step "go build (examples/clients/go)"
        # Removed first: go build does not rewrite a program whose build id matches, even a changed one.
        rm -f "$OUT/namesrv-client-go"
        (cd "$GO_DIR" && go build -o "$OUT/namesrv-client-go" .)
        save go-build "$KEY" "$OUT/namesrv-client-go"
    fi
    ran go-build "$KEY" "$OUT/namesrv-client-go"
fi
KEY="$(cd "$JAVA_DIR" && files_hash pom.xml src gen) $(java -version 2>&1 | head -n 1)"
# The jar names its dependencies in target/lib (its manifest's Class-Path): both are the output.
JAVA_OUT=("$JAVA_DIR/target/namesrv-client.jar" "$JAVA_DIR/target/lib")
if ! up_to_date mvn-package "$KEY" "${JAVA_OUT[@]}"; then
    if ! restore mvn-package-with-lib "$KEY" "${JAVA_OUT[@]}"; then
        step "mvn package (examples/clients/java)"
        rm -f "$JAVA_DIR/target/namesrv-client.jar" # as the Go program: the jar plugin may keep a newer jar
        (cd "$JAVA_DIR" && mvn -B -q package)
        save mvn-package-with-lib "$KEY" "${JAVA_OUT[@]}"
    fi
    ran mvn-package "$KEY" "${JAVA_OUT[@]}"
fi
KEY="$(cd "$TS_DIR" && files_hash src package.json package-lock.json tsconfig.json) $(node --version)"
if ! up_to_date tsc "$KEY" "$TS_DIR/dist"; then
    if ! restore tsc "$KEY" "$TS_DIR/dist"; then
        step "tsc (examples/clients/ts)"
        rm -rf "$TS_DIR/dist" # from scratch, as the generated code: a removed source leaves nothing behind
        (cd "$TS_DIR" && npm run --silent build)
        save tsc "$KEY" "$TS_DIR/dist"
    fi
    ran tsc "$KEY" "$TS_DIR/dist"
fi
if [ "$RAN" -eq 0 ]; then
    printf 'install-clients: nothing changed, nothing rebuilt (%d s)\n' "$((SECONDS - STARTED))"
else
    printf 'install-clients: steps run: %d (%d s)\n' "$RAN" "$((SECONDS - STARTED))"
fi
printf 'install-clients: the programs: %s, %s, %s\n' "$OUT/namesrv-client-go" "$JAVA_DIR/target/namesrv-client.jar" \
    "$TS_DIR/dist/main.js"
