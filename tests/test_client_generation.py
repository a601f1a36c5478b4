"""Clients without our Python package: the README's reflection client (and examples/reflection_client.py)
against a real NameServer, and ``buf generate`` with the shipped buf.gen.yaml (local plugins only, the
code of examples/clients/ in Go, Java and TypeScript)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, NamesrvProcess, Stubs, register_request, topic

EXAMPLE = ROOT / "examples" / "reflection_client.py"
BUF = ["npx", "--yes", "@bufbuild/buf@1.75.0"]


def readme_python_client() -> str:
    """The Python code block of the README that uses reflection."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    (block,) = [b for b in blocks if "ProtoReflectionDescriptorDatabase" in b]
    return str(block)


def test_readme_reflection_client_reads_a_route(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest", read=3, write=3)]), timeout=10)
    code = readme_python_client().replace("127.0.0.1:8081", namesrv.address)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert '"brokerName": "broker-a"' in ran.stdout
    assert '"readQueueNums": 3' in ran.stdout
    example = subprocess.run(
        [sys.executable, str(EXAMPLE), namesrv.address, "TopicTest"], capture_output=True, text=True, timeout=60
    )
    assert example.returncode == 0, example.stderr
    assert example.stdout == ran.stdout
    missing = subprocess.run(
        [sys.executable, str(EXAMPLE), namesrv.address, "NoSuchTopic"], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("NOT_FOUND: ")


def test_buf_gen_yaml_uses_local_plugins_only() -> None:
    config = yaml.safe_load((ROOT / "buf.gen.yaml").read_text(encoding="utf-8"))
    assert config["version"] == "v2"
    assert config["inputs"] == [{"directory": "protos"}]
    outs = set()
    for plugin in config["plugins"]:
        assert "remote" not in plugin
        assert plugin["out"].startswith("examples/clients/")
        outs.add(plugin["out"])
    assert outs == {"examples/clients/go/gen", "examples/clients/java/gen", "examples/clients/ts/src/gen"}
    # No commented-out plugin entries: every plugin in the file is used.
    text = (ROOT / "buf.gen.yaml").read_text(encoding="utf-8")
    assert not re.search(r"^\s*#\s*-\s*(local|protoc_builtin|remote):", text, flags=re.MULTILINE)


def test_generator_and_runtime_versions_agree() -> None:
    """protoc-gen-es and @bufbuild/protobuf must be one version; protoc and protobuf-java too (the
    install script reads the pom's versions)."""
    package = json.loads((ROOT / "examples" / "clients" / "ts" / "package.json").read_text(encoding="utf-8"))
    assert package["devDependencies"]["@bufbuild/protoc-gen-es"] == package["dependencies"]["@bufbuild/protobuf"]
    for versions in (package["dependencies"], package["devDependencies"]):
        assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in versions.values()), versions  # pinned
    script = (ROOT / "scripts" / "install-clients.sh").read_text(encoding="utf-8")
    assert 'maven_exe "com.google.protobuf:protoc:$PROTOBUF_VERSION" protoc' in script
    assert 'maven_exe "io.grpc:protoc-gen-grpc-java:$GRPC_VERSION" protoc-gen-grpc-java' in script
    go_mod = (ROOT / "examples" / "clients" / "go" / "go.mod").read_text(encoding="utf-8")
    runtime = re.search(r"google\.golang\.org/protobuf (v\S+)", go_mod)
    assert runtime is not None
    assert f"PROTOC_GEN_GO={runtime[1]}\n" in script  # generator and runtime of one release


def test_buf_generate_writes_go_java_and_typescript(tmp_path: Path) -> None:
    """The one command of buf.gen.yaml, on a copy of the repository's protos and buf.gen.yaml, with
    the plugins `make clients` installed."""
    plugins = [
        ROOT / "build" / "clients" / "bin" / name
        for name in ("protoc-gen-go", "protoc-gen-go-grpc", "protoc", "protoc-gen-grpc-java")
    ]
    es = ROOT / "examples" / "clients" / "ts" / "node_modules" / ".bin" / "protoc-gen-es"
    missing = [str(p) for p in (*plugins, es) if not p.exists()]
    if missing:
        message = f"run `make clients` first: missing {missing}"
        if os.environ.get("NAMESRV_REQUIRE_CLIENTS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.gen.yaml", tmp_path / "buf.gen.yaml")
    (tmp_path / "build").symlink_to(ROOT / "build")
    (tmp_path / "examples" / "clients" / "ts").mkdir(parents=True)
    (tmp_path / "examples" / "clients" / "ts" / "node_modules").symlink_to(es.parent.parent)
    generated = subprocess.run([*BUF, "generate"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert generated.returncode == 0, generated.stderr
    out = tmp_path / "examples" / "clients"
    go = sorted(p.name for p in (out / "go" / "gen" / "namesrv" / "v1").iterdir())
    assert "name_server_service_grpc.pb.go" in go
    assert "types.pb.go" in go
    assert "package namesrvv1" in (out / "go" / "gen" / "namesrv" / "v1" / "types.pb.go").read_text(encoding="utf-8")
    java = out / "java" / "gen" / "org" / "apache" / "rocketmq" / "namesrv" / "v1"
    assert (java / "NameServerServiceGrpc.java").exists()
    assert (java / "RegisterBrokerBody.java").exists()
    ts = sorted(p.name for p in (out / "ts" / "src" / "gen" / "namesrv" / "v1").iterdir())
    assert ts == ["admin_service_pb.ts", "kv_config_service_pb.ts", "name_server_service_pb.ts", "types_pb.ts"]
    services = (out / "ts" / "src" / "gen" / "namesrv" / "v1" / "name_server_service_pb.ts").read_text(encoding="utf-8")
    assert "export const NameServerService" in services
    assert "pickupTopicRoute" in services
