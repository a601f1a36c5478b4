"""The package as users get it: generated code matches protos/, and `pip install .` ships working
commands (CONTRACT.md "Programs"; issue: generated code built or shipped, never hand-edited)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT

# What `pip wheel` reads of the checkout (pyproject.toml: readme, packages found in src/ and analytics/).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "src", "analytics")


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    output: str  # pip's and setuptools' stdout + stderr (-v)


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> BuiltWheel:
    """The project's wheel, built once per module from a copy of the checkout's sources. Never in the
    checkout itself: setuptools builds in-tree (build/, *.egg-info), and `make image` beside the suite
    (test-checks) builds its wheel there at the same time; two in-tree builds race on build/lib."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(root), str(source)],
        capture_output=True,
        text=True,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, f"pip wheel failed ({built.returncode}):\n{output[-4000:]}"
    (wheel,) = root.glob("namesrv_grpc-*.whl")
    return BuiltWheel(wheel, output)


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path)], check=True)
    generated = sorted(p.relative_to(tmp_path) for p in (tmp_path / "namesrv" / "v1").iterdir() if p.is_file())
    committed = sorted(p.relative_to(ROOT / "src") for p in (ROOT / "src" / "namesrv" / "v1").iterdir() if p.is_file())
    assert generated == committed
    for relative in generated:
        assert (tmp_path / relative).read_bytes() == (ROOT / "src" / relative).read_bytes(), (
            f"src/{relative} differs from what protos/ generates: run `make proto`"
        )


def test_wheel_ships_generated_code_and_commands(built_wheel: BuiltWheel, tmp_path: Path) -> None:
    with zipfile.ZipFile(built_wheel.path) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
        archive.extractall(tmp_path / "site")
    assert "namesrv/v1/name_server_service_pb2.py" in names
    assert "namesrv/v1/name_server_service_pb2_grpc.py" in names
    assert "namesrv_grpc/py.typed" in names
    assert "namesrv = namesrv_grpc.cli:main" in scripts
    assert "broker-agent = broker_agent.cli:main" in scripts
    # The installed files alone (no source tree on the path) run both programs.
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}
    printed = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from namesrv_grpc.cli import main; raise SystemExit(main(['-p']))", str(tmp_path / "site")],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert "listenPort=9876" in printed.stdout
    helped = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from broker_agent.cli import main; raise SystemExit(main(['--help']))", str(tmp_path / "site")],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert helped.returncode == 0
    assert "--broker-config" in helped.stdout


def test_license_is_an_spdx_expression_without_deprecation_warnings(built_wheel: BuiltWheel) -> None:
    """``project.license`` as an SPDX string (PEP 639, setuptools >= 77): the metadata carries
    ``License-Expression`` and building prints no setuptools license deprecation block."""
    output = built_wheel.output
    assert "project.license" not in output
    assert "License classifiers are deprecated" not in output
    with zipfile.ZipFile(built_wheel.path) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
