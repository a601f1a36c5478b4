"""How the suite itself runs (docs/development.md): each pytest-xdist worker picks free ports from a
slice of its own, and ``make test`` / ``make test-quick`` run pytest as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_support import worker_port_range
from tests.support import ROOT


def test_one_process_gets_the_whole_port_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert worker_port_range(10_000, 20_000) == (10_000, 20_000)


def test_xdist_workers_get_disjoint_slices_of_the_port_range(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
        slices.append(worker_port_range(10_000, 20_000))
    assert slices == [(10_000, 12_500), (12_500, 15_000), (15_000, 17_500), (17_500, 20_000)]


def make_dry_run(target: str, *variables: str) -> str:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target, *variables], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_test_runs_the_suite_as_documented(tmp_path: Path) -> None:
    # test-checks' sub-make runs even under -n (it is a $(MAKE) line): its log goes to tmp_path, not
    # over the log of a `make test` running this test
    log = tmp_path / "test-checks.log"
    commands = make_dry_run("test", f"TEST_CHECKS_LOG={log}")
    assert "-j4 --output-sync=target test-setup" in commands
    assert "-j2 test-checks test-suite" in commands
    workers = os.environ.get("TEST_WORKERS") or "3"  # the Makefile's default unless a run overrides it
    assert f"-m pytest -q -n {workers} --dist loadgroup" in commands
    assert "-m pytest -q -n 0 --dist loadgroup" in make_dry_run("test", "TEST_WORKERS=0", f"TEST_CHECKS_LOG={log}")
    setup = make_dry_run("test-setup")
    for script in ("install-prometheus.sh", "install-podman.sh", "install-java.sh", "install-faketime.sh"):
        assert script in setup, script
    for script in ("install-rocketmq.sh", "install-clients.sh", "install-ali-ons.sh"):
        assert setup.index(script) > setup.index("install-faketime.sh"), f"{script} after the system packages"
    suite = make_dry_run("test-suite")
    # the suite's modules compiled before its workers start
    assert suite.index("-m pytest --collect-only") < suite.index(f"-m pytest -q -n {workers}")
    checks = log.read_text()
    for check in ("ruff check", "mypy", "promtool test rules", "image_test.py"):
        assert check in checks, check


def test_make_test_quick_leaves_out_the_slow_and_spark_tests() -> None:
    assert '-m pytest -q -n 2 --dist loadgroup -m "not slow and not spark"' in make_dry_run("test-quick")


GROUPED_SUITE = {
    "conftest.py": """
import os
import pytest

@pytest.fixture(scope="session")
def shared():
    open(os.path.join(os.environ["GROUP_OUT"], os.environ["PYTEST_XDIST_WORKER"]), "w").close()
    return 1
""",
    "test_grouped.py": """
import time
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_in_the_group(shared, i):
    time.sleep(0.1)

@pytest.mark.parametrize("i", range(6))
def test_anywhere(i):
    time.sleep(0.1)
""",
}


def test_loadgroup_keeps_a_group_on_one_worker(tmp_path: Path) -> None:
    """What tests/conftest.py relies on, run with this checkout's pytest and pytest-xdist: under
    ``-n 2 --dist loadgroup`` the tests of one ``xdist_group`` run on one worker, so a shared set-up
    starts once (pytest 9.2 with pytest-xdist 3.8 broke this: every worker started its own)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in GROUPED_SUITE.items():
        (suite / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "GROUP_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", str(suite)],
        cwd=suite, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(out.iterdir())) == 1, f"the shared set-up started on {sorted(p.name for p in out.iterdir())}"
