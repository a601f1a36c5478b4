"""The benchmark harness itself: every scenario runs at a tiny size (its numbers are meaningless
here, they live in docs/benchmarks.md), so its load generation, scraping, checks and table code
run; and a load generator never counts an error answer as a success."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from bench.harness import BenchError, GrpcTarget, Profile, h2load, namesrv, namesrv_lookup_target, row
from bench.route_workloads import DISTINCT_LAYOUTS, WORKLOADS, broker_topics, queue_nums, registration, trace
from bench.run import SCENARIOS, render_markdown, spread_text
from tests.rocketmq_support import ROCKETMQ_5, require_rocketmq
from tests.support import ROOT, _env

needs_h2load = pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load missing: make bench-tools")
needs_etcd = pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd missing: make bench-tools")


def run_tiny(tmp_path: Path, key: str) -> tuple[dict[str, Any], str]:
    out, results = tmp_path / "benchmarks.md", tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--tiny", "--only", key, "--out", str(out), "--results", str(results)],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(results.read_text()), out.read_text()


EXPECTED_ROWS = {
    "1": ["1", "1b"],
    "2": ["2a", "2b", "2c"],
    "3": ["3a", "3b"],
    "4": ["4a", "4b", "4c"],
    "5": ["5a", "5b", "5c", "5d"],
    "6": ["6a", "6b"],
    "7": ["7"],
    "8": ["8a", "8b"],
    "9": ["9a", "9b", "9c"],
    "10": ["10a", "10b", "10c", "10d"],
    "11": ["11a", "11b"],
    "12": [f"12{letter}" for letter in "abcdefghijklmnopqrstuvw"],
    "13": ["13a", "13b", "13c", "13d"],
    "14": ["14a"],
    "J1": ["J1a", "J1b", "J1c", "J1d"],
    "J2": ["J2a"],
    "J3": ["J3a", "J3b", "J3c", "J3d"],
}
JAVA_PEER_SCENARIOS = {"J1", "J2", "J3"}
"""Scenarios with the Java NameServer as a peer: they need the jars of ``make rocketmq``."""


def test_every_scenario_is_covered_here() -> None:
    assert set(EXPECTED_ROWS) <= set(SCENARIOS)


@needs_h2load
@needs_etcd
@pytest.mark.parametrize("key", [key for key in EXPECTED_ROWS if key not in JAVA_PEER_SCENARIOS])
def test_scenario_runs_tiny_and_every_row_is_complete(tmp_path: Path, key: str) -> None:
    check_tiny(tmp_path, key)


@pytest.mark.parametrize("key", sorted(JAVA_PEER_SCENARIOS))
def test_java_peer_scenario_runs_tiny_and_every_row_is_complete(tmp_path: Path, key: str) -> None:
    """The Java NameServer as a peer: needs the jars of ``make rocketmq`` (neither h2load nor etcd)."""
    require_rocketmq(ROCKETMQ_5)
    check_tiny(tmp_path, key)


def test_the_rows_of_issue_39_run_tiny_without_h2load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """12v (slowloris on both doors) and 12w (the connection caps filled from one address) need
    neither h2load nor etcd: run here even where the rest of scenario 12 is skipped."""
    monkeypatch.setenv("BENCH_S12_ROWS", "12v,12w")
    report, markdown = run_tiny(tmp_path, "12")
    result = report["scenarios"]["12"]
    assert "error" not in result, result
    assert [r["id"] for r in result["rows"]] == ["12v", "12w"]
    for r in result["rows"]:
        assert len(r["runs"]["gRPC p99 ms"]) == 3, r
        assert max(r["runs"]["acknowledged lost"]) == 0, r
        assert f"| {r['id']} | " in markdown
    saw = {row_id: runs[0]["note"] for row_id, runs in result["raw"].items()}
    assert "calls started" in saw["12v"], saw
    assert "still open" in saw["12v"], saw
    assert "connected from 127.0.0.2" in saw["12w"], saw


def check_tiny(tmp_path: Path, key: str) -> None:
    """Run scenario ``key`` at the tiny size and check every row is complete."""
    report, markdown = run_tiny(tmp_path, key)
    assert report["profile"] == "tiny"
    assert report["machine"]["cores"]
    result = report["scenarios"][key]
    assert "error" not in result, result
    assert [r["id"] for r in result["rows"]] == EXPECTED_ROWS[key]
    assert f"## {key}. {result['title']}" in markdown
    for r in result["rows"]:
        assert r["what"], r
        assert r["sample"], r
        assert r["baseline"], r
        assert r["runs"], r
        for name, values in [*r["runs"].items(), *r["baseline_runs"].items()]:
            assert len(values) >= 3, f"{r['id']} {name}: {values}"
            assert all(v >= 0 for v in values), f"{r['id']} {name}: {values}"
        assert f"| {r['id']} | " in markdown
    check = SCENARIO_CHECKS.get(key)
    if check is not None:
        check(result)


def _row(result: dict[str, Any], row_id: str) -> dict[str, Any]:
    return next(r for r in result["rows"] if r["id"] == row_id)


def _check_13(result: dict[str, Any]) -> None:
    assert result["raw"]["queue_datas"] == 2_000
    assert all(b > 0 for b in _row(result, "13b")["runs"]["bytes per topic over idle"])
    assert all(run["extra"]["checked_answers"] >= 1 for run in result["raw"]["churned"])
    assert len(_row(result, "13a")["runs"]["GC pauses over 20 ms"]) == 3


def _check_14(result: dict[str, Any]) -> None:
    assert result["raw"]["landed"] is True, "every registration of the restart must land"


def _check_2(result: dict[str, Any]) -> None:
    assert result["raw"]["topics"] == 300
    assert "60 distinct topics drawn at random" in _row(result, "2a")["what"]
    assert all(run["requests"] == 60 for run in result["raw"]["cold"] + result["raw"]["warm"])
    assert all(run["extra"]["checked_answers"] >= 1 for run in result["raw"]["cold"])


def _check_4(result: dict[str, Any]) -> None:
    assert _row(result, "4c")["met"] is True, "the registered topics must all be visible"
    assert "1,000 topics" in result["title"]


def _check_6(result: dict[str, Any]) -> None:
    assert _row(result, "6b")["met"] is True, "the expiry scan removed the wrong brokers"


def _check_9(result: dict[str, Any]) -> None:
    assert all(v < 30_000 for v in _row(result, "9a")["runs"]["ms"])
    assert all(v >= 750 for v in _row(result, "9b")["runs"]["ms"]), "removed before its heartbeat timeout (1 s)"


def _check_10(result: dict[str, Any]) -> None:
    raw = result["raw"]
    assert set(raw) == {"etcd_linearizable", "etcd_serializable", "grpc", "remoting"}
    for runs in raw.values():
        assert all(run["grpc_ok"] > 0 and run["server_cpu_seconds"] >= 0 for run in runs)
    assert "bottleneck per run" in _row(result, "10d")["note"]


def _check_j1(result: dict[str, Any]) -> None:
    raw = result["raw"]
    assert "-Xmx" in raw["java_heap"]
    assert set(raw["lookups"]) == {"Java 5.5.0", "ours"}
    assert all(run["grpc_ok"] > 0 for runs in raw["lookups"].values() for run in runs)
    for row_id in ("J1a", "J1b", "J1c", "J1d"):
        r = _row(result, row_id)
        assert set(r["runs"]) == set(r["baseline_runs"]), r  # ours and Java measured alike
    assert all(v > 10 for v in _row(result, "J1b")["baseline_runs"]["RSS MiB"]), "a JVM uses more than 10 MiB"


def _check_j2(result: dict[str, Any]) -> None:
    r = _row(result, "J2a")
    assert "smoke" in r["what"]
    assert "seed 9191" in r["what"]
    assert set(r["runs"]) == set(r["baseline_runs"])
    assert "ours / Java" in r["note"]
    assert all(0 < s < 60 for s in r["runs"]["fleet re-registration s"]), r["runs"]  # no stall between runs


def _check_j3(result: dict[str, Any]) -> None:
    raw = result["raw"]
    assert set(raw["beats"]) == {"Java 5.5.0", "ours"}
    for beats in raw["beats"].values():
        assert len(beats) == 3
        assert all(b["rate"] > 0 and b["p99"] > 0 for b in beats), beats
    assert len(raw["grpc"]) == 3
    assert all(run["grpc_ok"] > 0 for run in raw["grpc"])
    assert all(run["requests"] > 0 for runs in raw["remoting"].values() for run in runs)
    assert set(_row(result, "J3a")["runs"]) == set(_row(result, "J3a")["baseline_runs"])
    assert all(0 <= share <= 1 for share in _row(result, "J3c")["runs"]["route-table process busy share"])
    assert min(_row(result, "J3d")["baseline_runs"]["PSS MiB"]) > 10, "a JVM uses more than 10 MiB"


def test_the_scale_fleet_puts_every_topic_on_four_broker_names_with_master_and_slave() -> None:
    """J3's cluster (bench/scale.py): names in groups of four carrying the same topics, a master and
    a slave per name, each request's CRC of its own body."""
    import json

    from bench.scale import fleet

    requests = fleet(8, 10)
    assert len(requests) == 16
    names_of: dict[str, set[str]] = {}
    for header, body in requests:
        assert header["bodyCrc32"] == str(zlib.crc32(body) & 0x7FFFFFFF)
        for topic in json.loads(body)["topicConfigSerializeWrapper"]["topicConfigTable"]:
            names_of.setdefault(topic, set()).add(header["brokerName"])
    assert sorted(names_of) == sorted(f"scale-topic-{t}" for t in range(10))
    assert all(len(names) == 4 for names in names_of.values())
    assert names_of["scale-topic-0"] == {f"scale-{n:04d}" for n in range(4)}
    assert names_of["scale-topic-1"] == {f"scale-{n:04d}" for n in range(4, 8)}
    assert {h["brokerId"] for h, _ in requests} == {"0", "1"}
    with pytest.raises(ValueError, match="multiple of 4"):
        fleet(6, 10)


SCENARIO_CHECKS = {
    "2": _check_2, "4": _check_4, "6": _check_6, "9": _check_9, "10": _check_10, "13": _check_13, "14": _check_14,
    "J1": _check_j1, "J2": _check_j2, "J3": _check_j3,
}  # fmt: skip


def test_route_workloads_are_rocketmq_rusts() -> None:
    """The four published profiles; the trace has exactly the published mixes; every topic is on
    ``route_width`` brokers; the registrations are accepted shapes (two topics or more each)."""
    assert [w.name for w in WORKLOADS] == ["smoke", "topics-20k-width-1", "topics-100k-width-4", "topics-100k-width-16"]
    smoke = WORKLOADS[0]
    assert (smoke.topics, smoke.brokers, smoke.route_width, smoke.connections) == (100, 10, 4, 16)
    entries = trace(smoke)
    assert len(entries) == 2_000
    assert entries == trace(smoke)
    assert sum(e[0] for e in entries) == 100  # 5 % writes
    reads = [e for e in entries if not e[0]]
    assert sum(e[3] for e in entries) == 200
    assert sum(e[4] for e in entries) == 1_000
    assert len({e[1] for e in reads}) > 90
    assert len({e[2] for e in entries}) == 10
    table = broker_topics(smoke)
    assert all(len(topics) == 40 for topics in table)
    assert sum(t == 7 for topics in table for t in topics) == 4
    header, body = registration(smoke, 3, table[3])
    assert header["__ZONE_NAME"] == "zone-b"
    assert header["bodyCrc32"] == str(zlib.crc32(body) & 0x7FFFFFFF)
    assert b'"RouteBenchTopic-000003"' in body


def test_the_distinct_layouts_workload_shares_no_answer() -> None:
    """Issue 41's J2e: no two topics hold the same QueueData (width 1, each broker's topics with their
    own queue numbers and perm), in the full size and the quick one; the fixture's profiles keep 4/4/6."""
    for w in (DISTINCT_LAYOUTS, DISTINCT_LAYOUTS.scaled("quick", 20, 64, 100)):
        table = broker_topics(w)
        assert {len(topics) for topics in table} == {500}
        layouts = {(broker, queue_nums(w, t)) for broker, topics in enumerate(table) for t in topics}
        assert len(layouts) == w.topics
        _, body = registration(w, 1, table[1])
        nums = {
            (c["readQueueNums"], c["writeQueueNums"], c["perm"])
            for c in json.loads(body)["topicConfigSerializeWrapper"]["topicConfigTable"].values()
        }
        assert len(nums) == 500
    assert {queue_nums(w, t) for w in WORKLOADS for t in range(w.topics)} == {(4, 4, 6)}


def test_quick_titles_say_what_ran(tmp_path: Path) -> None:
    """Headings come from what ran, not from the full run's sizes (issue 12 item 17)."""
    report, markdown = run_tiny(tmp_path, "6")
    assert report["scenarios"]["6"]["title"] == "expiry scan, 1,000 brokers, 100 expired"
    assert "10,000" not in markdown


def test_markdown_gives_every_metric_as_min_median_max_with_its_runs() -> None:
    assert spread_text({"req/s": [3.0, 1.0, 2.0]}) == "req/s: 1.00 / **2.00** / 3.00<br>(3 runs)"
    report = {
        "date": "2026-11-22 20:00 UTC", "command": "make bench", "profile": "full", "seconds": 1.0,
        "load_before": "1 1 1", "load_after": "2 2 2",
        "machine": {"cores": "2", "cpu": "X", "python": "3", "grpcio": "1", "os": "L", "h2load": "h", "etcd": "e"},
        "scenarios": {
            "6": {
                "title": "a title", "raw": {},
                "rows": [row("6a", "what | ran", "n", {"ms": [1, 2, 3]}, baseline="base", target="t", met=False)],
            },
            "7": {"error": "BenchError: broken"},
        },
    }  # fmt: skip
    text = render_markdown(report)
    assert "## 6. a title" in text
    assert "| 6a | what \\| ran | n | ms: 1.00 / **2.00** / 3.00<br>(3 runs) | base | t | **NO** |" in text
    assert "Could not run: `BenchError: broken`" in text
    assert "Load average (1/5/15 min) 1 1 1 at the start, 2 2 2 at the end" in text


def test_profile_sizes() -> None:
    assert Profile("full").pick(1, 2, 3) == 1
    assert Profile("tiny").pick(1, 2, 3) == 3
    assert Profile("quick").quick
    assert not Profile("full").quick
    assert Profile("tiny").repeats >= 3


@needs_h2load
def test_h2load_error_answers_are_never_counted_as_successes() -> None:
    """h2load counts HTTP 200 whatever the grpc-status trailer says: a lookup of a topic that does
    not exist (NOT_FOUND every time) must fail the run, not report a fast success."""
    with namesrv() as server:
        target = namesrv_lookup_target(server, "NoSuchTopic", 1)
        with pytest.raises(BenchError, match=r"NotFound|NOT_FOUND"):
            h2load(target, seconds=1, connections=1, streams=4)


@needs_h2load
def test_h2load_wrong_answers_are_caught_by_the_sample_check() -> None:
    """A run whose answers are OK but not the expected route fails on the gRPC client's check."""
    with namesrv() as server:
        ok = namesrv_lookup_target(server, "NoSuchTopic", 1)
        health = GrpcTarget(
            "health as a route", server.address, "/grpc.health.v1.Health/Check", b"", server.pid, server.metrics_url,
            ok.check,
        )  # fmt: skip
        with pytest.raises(BenchError):
            h2load(health, seconds=1, connections=1, streams=4, warm_up=0.5)


def test_grpc_load_counts_error_answers_as_errors() -> None:
    from bench.grpc_load import grpc_load
    from namesrv.v1 import name_server_service_pb2 as ns_pb2

    with namesrv() as server:
        requests = [ns_pb2.PickupTopicRouteRequest(topic=f"Missing{i}").SerializeToString() for i in range(20)]
        with pytest.raises(BenchError, match="NOT_FOUND"):
            grpc_load(
                server.address, "/namesrv.v1.NameServerService/PickupTopicRoute", requests, server_pid=server.pid,
                processes=1, concurrency=4,
            )  # fmt: skip


def test_remoting_blast_counts_error_answers_as_errors() -> None:
    from bench.remoting_load import remoting_load

    with namesrv() as server, pytest.raises(BenchError, match=r"TOPIC_NOT_EXIST|error"):
        remoting_load(
                "blast", server.remoting_address, ["NoSuchTopic"], server_pid=server.pid,
                metrics_url=server.metrics_url, seconds=1, processes=1, connections=1, depth=8,
            )  # fmt: skip


@pytest.mark.parametrize("compressed", [False, True])
def test_register_cost_runs_and_reports_every_phase(compressed: bool) -> None:
    """``python -m bench.register_cost`` (decode + apply of J1's bodies, in process) at a tiny size."""
    args = [sys.executable, "-m", "bench.register_cost", "--brokers", "3", "--topics", "40"]
    completed = subprocess.run(
        [*args, "--compressed"] if compressed else args, capture_output=True, text=True, env=_env(), cwd=ROOT,
        timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert (report["brokers"], report["topics"], report["compressed"]) == (3, 40, compressed)
    assert {phase: times["registrations"] for phase, times in report["phases"].items()} == {
        "first": 1, "join": 2, "rereg": 3,
    }  # fmt: skip
    for times in report["phases"].values():
        assert set(times) == {f"{what}{cpu}_ms" for what in ("decode", "apply", "total") for cpu in ("", "_cpu")} | {
            "registrations"
        }


def test_first_lookups_reports_both_ways_for_every_form() -> None:
    """``python -m bench.first_lookups`` (first lookups per topic and by content, in process) at a
    tiny size; a bad size is a usage error naming the options."""
    args = [sys.executable, "-m", "bench.first_lookups", "--topics", "200", "--layouts", "8", "--brokers", "6"]
    completed = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert (report["topics"], report["layouts"], report["brokers"]) == (200, 8, 6)
    assert 1 <= report["distinct_layouts"] <= 8
    for form in ("grpc", "standard_json", "old_json"):
        assert set(report[form]) == {
            f"{way}_{when}_us" for way in ("per_topic", "by_content") for when in ("first", "warm")
        } | {"first_ratio"}
        assert all(value > 0 for value in report[form].values())
    bad = subprocess.run([*args[:3], "--topics", "0"], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert bad.returncode == 2
    assert "--topics, --layouts and --brokers must be at least 1" in bad.stderr
