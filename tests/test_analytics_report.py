"""What a reader of the reports sees: system topics kept out of the findings, readable time labels,
no chart without a trend, and a bad input refused in one line before Spark starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from pyspark.sql import SparkSession

from namesrv_analytics import topic_distribution
from namesrv_analytics.report import has_trend, line_chart
from tests.analytics_support import at, broker_data, manifest, queue_data
from tests.support import SHORT_JVM_OPTIONS

NS1 = "ns1:9876"


def tick_labels(series: dict[str, tuple[list[datetime], list[float]]]) -> list[str]:
    figure = line_chart(series, title="t", ylabel="y")
    FigureCanvasAgg(figure).draw()  # type: ignore[no-untyped-call]
    (ax,) = figure.axes
    return [label.get_text() for label in ax.get_xticklabels() if label.get_text()] + [ax.get_xlabel()]


@pytest.mark.parametrize(
    ("span", "step"),
    [
        pytest.param(timedelta(seconds=2), timedelta(milliseconds=200), id="seconds"),
        pytest.param(timedelta(minutes=20), timedelta(minutes=1), id="minutes"),
        pytest.param(timedelta(days=3), timedelta(hours=6), id="days"),
    ],
)
def test_time_axis_labels_are_readable_at_every_span(span: timedelta, step: timedelta) -> None:
    start = datetime(2026, 11, 22, 19, 51, 19, 600_000)
    times = [start + step * i for i in range(int(span / step) + 1)]
    labels = tick_labels({"topics": (times, [float(i) for i in range(len(times))])})
    *ticks, axis_label = labels
    assert axis_label.startswith("time (UTC)")
    assert len(ticks) >= 3, labels
    assert not [label for label in ticks if re.search(r"\d\.\d{4,}", label)], labels  # no "51:19.600000"
    assert all(re.search(r"\d\d:\d\d", label) for label in ticks), labels  # every label names hours and minutes
    assert len(set(ticks)) == len(ticks), f"each tick says a different time: {labels}"


def test_a_single_time_is_no_trend() -> None:
    one = datetime(2026, 11, 22, 19, 51, 19)
    assert not has_trend({"a": ([one], [1.0]), "b": ([one], [2.0])})
    assert has_trend({"a": ([one, one + timedelta(seconds=1)], [1.0, 2.0])})


@pytest.mark.spark
def test_the_single_broker_headline_counts_business_topics_only(spark: SparkSession, tmp_path: Path) -> None:
    """broker-a alone holds T1 and five system topics; T2 is on both brokers. The headline says 1
    single-broker business topic (not 6) and no system topic appears in the single-broker table."""
    system = ["%RETRY%group-1", "%DLQ%group-1", "DefaultCluster", "broker-a", "TBW102"]
    rows = [(NS1, at(0), name, "broker-a", 4, 4, 6) for name in ["T1", *system]]
    rows += [(NS1, at(0), "T2", broker, 4, 4, 6) for broker in ("broker-a", "broker-b")]
    qd = queue_data(spark, rows)
    bd = broker_data(
        spark,
        [(NS1, at(0), "DefaultCluster", b, 0, f"10.0.0.{i}:10911") for i, b in enumerate(("broker-a", "broker-b"))],
    )
    topics = topic_distribution.topic_distribution(qd, bd)
    brokers = topic_distribution.broker_distribution(qd, bd)
    clusters = topic_distribution.cluster_distribution(brokers, qd, bd)
    summary = topic_distribution.snapshot_summary(manifest(spark, [(NS1, at(0))]), topics, brokers, clusters)
    page = topic_distribution.build_report(topics, brokers, clusters, summary, snapshots=1, skipped=0).html()
    headline = re.search(r'<div class="value">([^<]*)</div><div class="label">single-broker business topics', page)
    assert headline is not None, "the headline names business topics"
    assert headline.group(1) == "1 (50.0 %)"
    single_table = page.split("Single-broker business topics")[1].split("</table>")[0]
    assert "<td>T1</td>" in single_table
    for name in system:
        assert f"<td>{name}</td>" not in single_table, name
    assert "One snapshot time only: no trend to draw." in page
    assert page.count("data:image/png") == 2, "two bar charts, no one-point line chart"
    assert "Gini: 0 = every broker" in page, "the measures are explained"


@pytest.mark.parametrize("kind", ["missing", "empty", "no-manifest-file", "a-file"])
def test_a_bad_input_is_one_line_and_exit_2_before_spark_starts(tmp_path: Path, kind: str) -> None:
    snapshots = tmp_path / "snapshots-dir"
    if kind == "empty":
        snapshots.mkdir()
    elif kind == "no-manifest-file":
        (snapshots / "snapshots").mkdir(parents=True)
    elif kind == "a-file":
        snapshots.write_text("not a directory")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "namesrv_analytics.topic_distribution", "--snapshots", str(snapshots), "--out", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"topic_distribution: no snapshots under {snapshots}")
    assert "Exception" not in result.stderr
    assert "at org." not in result.stderr
    assert not (tmp_path / "x").exists()
    assert elapsed < 60, "no JVM was started (a JVM start alone takes several seconds; generous for a loaded box)"


@pytest.mark.spark
def test_local_jobs_keep_spark_off_the_network(tmp_path: Path) -> None:
    """A job's own local session has no web UI and a driver on loopback, and Spark prints no
    warning about choosing a network interface."""
    code = (
        "from namesrv_analytics.common import build_session\n"
        "s = build_session('t', 'local[1]')\n"
        "print(s.sparkContext.uiWebUrl, s.conf.get('spark.driver.host'), flush=True)\n"
        "s.stop()\n"
    )
    # The JVM's compiler flags (the tests' short-JVM ones: ~18 -> ~10 CPU-s for this run) change
    # nothing of what is checked here: the session's own settings.
    env = {**os.environ, "JAVA_TOOL_OPTIONS": SHORT_JVM_OPTIONS}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["None", "127.0.0.1"]
    assert "resolves to a loopback address" not in result.stderr
    assert "Set SPARK_LOCAL_IP" not in result.stderr
