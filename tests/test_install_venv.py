"""scripts/install-venv.sh: a new virtual environment is a copy of the prepared one in the build
cache (``make`` prepares it), pointed at itself, with the project installed editable from the
checkout; the prepared environment is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

BUILD_CACHE = (
    os.environ.get("NAMESRV_BUILD_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "namesrv-grpc"
)
CACHE = Path(BUILD_CACHE) / "venv"


def first_line(path: Path) -> str:
    with path.open("rb") as f:
        return f.readline().decode()


def test_a_new_environment_is_a_copy_that_points_at_itself(tmp_path: Path) -> None:
    prepared = sorted(p for p in CACHE.glob("*") if not p.name.startswith(".") and (p / "bin" / "python").exists())
    if not prepared:
        pytest.skip(f"no prepared environment under {CACHE}: `make` makes it")
    before = {p: first_line(p / "bin" / "pytest") for p in prepared}
    # the Python the newest prepared environment was made with: its copy needs no new preparation
    newest = max(prepared, key=lambda p: p.stat().st_mtime)
    config = dict(line.split(" = ", 1) for line in (newest / "pyvenv.cfg").read_text().splitlines() if " = " in line)
    python = Path(config["home"]) / "python3"
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-venv.sh"), str(venv), str(python)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a copy of" in done.stdout, done.stdout
    assert first_line(venv / "bin" / "pytest") == f"#!{venv}/bin/python\n"
    assert first_line(venv / "bin" / "namesrv") == f"#!{venv}/bin/python\n"
    assert {p: first_line(p / "bin" / "pytest") for p in prepared} == before, "the prepared environment changed"
    code = "import sys, namesrv_grpc, pyspark; print(sys.prefix, namesrv_grpc.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.split() == [str(venv), str(ROOT / "src" / "namesrv_grpc" / "__init__.py")]
    assert sys.prefix != str(venv)


def test_a_venv_directory_without_python_is_refused_at_once_and_left_alone(tmp_path: Path) -> None:
    """A ``.venv`` that exists but is no environment (an interrupted copy, a stray directory) is
    refused with one line naming it, before any prepared environment is made, and is not written into
    (a copy into it would nest the environment inside)."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "stray").write_text("kept")
    cache = tmp_path / "cache"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-venv.sh"), str(venv), sys.executable],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NAMESRV_BUILD_CACHE": str(cache)},
    )  # fmt: skip
    assert done.returncode == 1, done
    assert f"install-venv: {venv} exists but has no bin/python; remove it and run again" in done.stderr
    assert sorted(p.name for p in venv.iterdir()) == ["stray"]
    assert not cache.exists()  # nothing was prepared for it
