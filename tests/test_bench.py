"""The benchmark harness itself runs (its numbers live in docs/benchmarks.md, never in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, _env


def test_bench_quick_runs_scenarios_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--only", "6,7", "--out", str(out)],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads((ROOT / "bench" / "results" / "quick.json").read_text())
    scan = report["scenarios"]["6"]
    assert scan["removals_correct"] is True
    assert scan["expired"] == 1000
    assert scan["brokers"] == 10_000
    memory = report["scenarios"]["7"]
    assert 10 < memory["idle_rss_mib"] < 1000
    assert memory["loaded_rss_mib"] >= memory["idle_rss_mib"] * 0.9
    text = out.read_text()
    assert "| 6 | expiry scan, 10,000 brokers, 1,000 expired |" in text
    assert report["machine"]["cores"]
