"""Clients without our Python package: the README's reflection client (and examples/reflection_client.py)
against a real NameServer, and ``buf generate`` with the shipped buf.gen.yaml (local plugins only)."""

from __future__ import annotations

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
    for plugin in config["plugins"]:
        assert "remote" not in plugin
        assert plugin["out"].startswith("gen/")


def test_buf_generate_writes_typescript_clients(tmp_path: Path) -> None:
    """The one command of the README, on a copy of the repository's protos and buf.gen.yaml."""
    if shutil.which("npx") is None:
        pytest.skip("npx (Node.js) is not installed; make lint needs it for buf too")
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.gen.yaml", tmp_path / "buf.gen.yaml")
    generated = subprocess.run([*BUF, "generate"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert generated.returncode == 0, generated.stderr
    out = tmp_path / "gen" / "es" / "namesrv" / "v1"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["admin_service_pb.ts", "kv_config_service_pb.ts", "name_server_service_pb.ts", "types_pb.ts"]
    services = (out / "name_server_service_pb.ts").read_text(encoding="utf-8")
    assert "export const NameServerService" in services
    assert "pickupTopicRoute" in services
