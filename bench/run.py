"""``make bench`` / ``make bench-quick``: run the benchmark scenarios, write the results as JSON
(``bench/results/``) and as tables in ``docs/benchmarks.md``.

    python -m bench.run [--quick | --tiny] [--only 1,3] [--out docs/benchmarks.md]

``--quick`` (under 3 minutes) uses smaller tables and shorter runs; ``--tiny`` (the test suite) runs
every code path in seconds. Only the full run's numbers go into the docs. Exit code 0 whatever the
numbers (a missed target is reported, not an error); 1 when a scenario could not run.

Adding a scenario: write a function ``Profile -> {"title", "rows", "raw"}`` (rows built with
:func:`bench.harness.row`) and add it to ``SCENARIOS`` below; the key is its number in the tables.
A function in the older form ``f(quick: bool) -> dict`` goes in as ``legacy(f)``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import big_table, java_peer, peers, remoting_hostile, scale, scenarios
from bench.harness import ROOT, Profile, Result, load_average, machine, spread
from bench.watch_scenarios import WATCH_SCENARIOS, watch_summary

Scenario = Callable[[Profile], Result]


def legacy(scenario: Callable[[bool], Result]) -> Scenario:
    """A scenario in the older form ``scenario(quick) -> {..., "target", "met"}`` (no rows): run
    with ``quick`` for the quick and tiny profiles; its result is shown as JSON under its title."""
    return lambda profile: scenario(profile.quick)


# The scenario registry: key -> (short name for progress lines and --only, function). The tables
# take each scenario's title from its result, so they say what actually ran at the profile's size.
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "1": ("lookup of one topic vs an empty call", scenarios.s1_small_route),
    "2": ("random-topic lookups, cold and warm cache, big table", scenarios.s2_large_cluster),
    "3": ("lookups while a big broker registers every second", scenarios.s3_lookups_during_registrations),
    "4": ("first RegisterBroker by size", scenarios.s4_register_sizes),
    "5": ("QueryDataVersion, heartbeat, accepted and rejected re-registration", scenarios.s5_unchanged_broker),
    "6": ("expiry scan", scenarios.s6_expiry_scan),
    "7": ("memory", scenarios.s7_memory),
    "8": ("agent round with a black-holing NameServer", scenarios.s8_agent_black_hole),
    "9": ("liveness latencies (agent killed / stopped, NameServer restarted)", scenarios.s9_liveness),
    "10": ("lookups: remoting vs gRPC vs etcd Range, requests/s and CPU per request", peers.s10_lookup_peers),
    "11": ("remoting lookups during a big REGISTER_BROKER every second", peers.s11_remoting_during_registrations),
    "12": ("clients that try to starve the others (issue 20)", remoting_hostile.s12_hostile_clients),
    "13": ("200,000 topics x 4 broker names: GC pauses, loop lag, RSS per topic", big_table.s13_big_table),
    "14": ("ten brokers of 20,000 topics registering at once", big_table.s14_cluster_restart),
    "J1": ("the Java NameServer as a peer: lookups, CPU, RSS, p99 under re-registration", java_peer.j1_java_peer),
    "J2": ("mxsm/rocketmq-rust route workloads, Java NameServer and ours", java_peer.j2_route_workloads),
    "J3": ("5,000 brokers every 30 s over 200,000 topics x 4 broker names, Java NameServer and ours", scale.j3_scale),
    # Route watching (bench/watch_scenarios.py), in the older one-line form.
    **{key: (title, legacy(scenario)) for key, (title, scenario) in WATCH_SCENARIOS.items()},
}

LEGACY_SUMMARIES: dict[str, Callable[[str, Result], str]] = {key: watch_summary for key in WATCH_SCENARIOS}
"""The one-line summary of each scenario in the older form (no rows), for its table."""


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def spread_text(runs: dict[str, list[float]]) -> str:
    """``metric: min / median / max`` per metric, one per line (``<br>``), with the number of runs."""
    parts = []
    for name, values in runs.items():
        if not values:
            continue
        s = spread(values)
        parts.append(f"{name}: {_number(s['min'])} / **{_number(s['median'])}** / {_number(s['max'])}")
    count = max((len(v) for v in runs.values()), default=0)
    return "<br>".join(parts) + (f"<br>({count} runs)" if parts else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any]) -> str:
    """The results as docs/benchmarks.md."""
    m = report["machine"]
    profile = report["profile"]
    lines = [
        "# Benchmarks",
        "",
        f"Measured {report['date']} with `{report['command']}` ({profile} run, {report['seconds']:.0f} s). "
        f"Regenerate with `make bench`; `make bench-quick` runs the same scenarios smaller (its figures are "
        "for development and are not written here).",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}); Python {m['python']}, grpcio {m['grpcio']}; {m['os']}; "
        f"{m['h2load']}; {m['etcd']}. Load average (1/5/15 min) {report['load_before']} at the start, "
        f"{report['load_after']} at the end.",
        "",
        "**Read ratios, not absolute numbers.** The machine is small and was shared with other jobs while this "
        "ran (see the load average), so absolute throughput and latency move from run to run. Every row names "
        "its baseline, measured in the same run against the same server process with the same client; the ratio "
        "to it is what carries over to another machine.",
        "",
        "How to read a row: *what ran* is exactly what was timed; *sample* is the size of one run; every metric "
        "is given as min / **median** / max over the repeated runs (each run a separate measurement, never one "
        "number); *met* compares the median (or every run, where the target says so) with the target. "
        "The NameServer is `python -m namesrv_grpc` on loopback; load generators run in separate processes. "
        "Server CPU per request is the server process's user+system CPU (from /proc/PID/stat) over the run "
        "divided by the requests it answered OK.",
        "",
    ]
    for key, result in report["scenarios"].items():
        if "error" in result:
            lines += [f"## {key}. {SCENARIOS[key][0]}", "", f"Could not run: `{result['error']}`", ""]
            continue
        if "rows" not in result:  # a scenario in the older one-line form: one run, its own summary
            summary = LEGACY_SUMMARIES[key](key, result) if key in LEGACY_SUMMARIES else json.dumps(result)
            met = "yes" if result.get("met") else "**NO**"
            lines += [
                f"## {key}. {SCENARIOS[key][0]}",
                "",
                "One run, in the scenario's own format (raw figures in the results JSON).",
                "",
                "| scenario | target | measured | met |",
                "|---|---|---|---|",
                f"| {key} | {_cell(str(result.get('target', '-')))} | {_cell(summary)} | {met} |",
                "",
            ]
            continue
        lines += [
            f"## {key}. {result['title']}",
            "",
            "| row | what ran | sample per run | measured: min / **median** / max "
            "| baseline (in words; measured) | target | met |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in result["rows"]:
            baseline = r["baseline"] + (f"<br>{spread_text(r['baseline_runs'])}" if r["baseline_runs"] else "")
            met = "reported" if r["met"] is None else ("yes" if r["met"] else "**NO**")
            lines.append(
                f"| {r['id']} | {_cell(r['what'])} | {_cell(r['sample'])} | {spread_text(r['runs'])} | "
                f"{_cell(baseline)} | {_cell(r['target'] or '-')} | {met} |"
            )
        notes = [r["note"] for r in result["rows"] if r.get("note")]
        if notes:
            lines += [""] + [f"- {_cell(note)}" for note in notes]
        for paragraph in result.get("notes", []):  # the scenario's own text (markdown), after its table
            lines += ["", paragraph]
        lines.append("")
    lines += [
        "## Raw results",
        "",
        f"Every run's figures are in `bench/results/{'full' if profile == 'full' else profile}.json`.",
        "",
    ]
    return "\n".join(lines)


def scenario_met(result: Result) -> bool:
    if "rows" in result:
        return all(r["met"] is not False for r in result["rows"])
    return bool(result.get("met"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller and shorter (under 3 minutes)")
    size.add_argument("--tiny", action="store_true", help="every code path in seconds (the test suite)")
    parser.add_argument("--only", default="", help="comma-separated scenario numbers")
    parser.add_argument(
        "--out", type=Path, default=None, help="markdown file (default docs/benchmarks.md for a full run; else none)"
    )
    parser.add_argument("--results", type=Path, default=None, help="JSON file (default bench/results/PROFILE.json)")
    args = parser.parse_args(argv)
    profile = Profile("tiny" if args.tiny else "quick" if args.quick else "full")
    wanted = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    keys = [k for k in SCENARIOS if not wanted or k in wanted]
    started = time.perf_counter()
    load_before = load_average()
    results: dict[str, Any] = {}
    failed = False
    for key in keys:
        name, scenario = SCENARIOS[key]
        print(f"[{key}] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            results[key] = scenario(profile)
        except Exception as exc:
            traceback.print_exc()
            results[key] = {"error": f"{type(exc).__name__}: {exc}"}
            failed = True
        label = results[key].get("title") or results[key].get("error") or name
        print(f"[{key}] {time.perf_counter() - t0:.1f} s: {label}", flush=True)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": {"full": "make bench", "quick": "make bench-quick", "tiny": "python -m bench.run --tiny"}[
            profile.name
        ],
        "profile": profile.name,
        "seconds": time.perf_counter() - started,
        "load_before": load_before,
        "load_after": load_average(),
        "machine": machine(),
        "scenarios": results,
    }
    results_path = args.results or ROOT / "bench" / "results" / f"{profile.name}.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(report, indent=2) + "\n")
    out = args.out or (ROOT / "docs" / "benchmarks.md" if profile.name == "full" else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_markdown(report))
        print(f"wrote {out}")
    print(f"wrote {results_path}")
    for key in keys:
        result = results[key]
        if "error" in result:
            print(f"  {key}: ERROR {result['error']}")
            continue
        print(f"  {key}: {'met' if scenario_met(result) else 'NOT met'}  {result.get('title', '')}")
        for r in result.get("rows", []):
            medians = ", ".join(f"{k} {spread(v)['median']:.4g}" for k, v in r["runs"].items() if v)
            print(f"      {r['id']}: {medians}{'' if r['met'] is not False else '  (target missed)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
