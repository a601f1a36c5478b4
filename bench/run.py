"""``make bench`` / ``make bench-quick``: run the benchmark scenarios, write the results as JSON
(``bench/results/``) and as a table in ``docs/benchmarks.md``.

    python -m bench.run [--quick] [--only 1,3] [--out docs/benchmarks.md]

``--quick`` (under 2 minutes) uses smaller tables and shorter runs; its numbers are for development,
the full run's go into the docs. Exit code 0 whatever the numbers (a missed target is reported, not
an error); 1 when a scenario could not run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness import ROOT, machine
from bench.scenarios import SCENARIOS as BASE_SCENARIOS
from bench.watch_scenarios import WATCH_SCENARIOS, watch_summary

SCENARIOS = {**BASE_SCENARIOS, **WATCH_SCENARIOS}


def render_markdown(report: dict[str, Any]) -> str:
    """The results as docs/benchmarks.md."""
    m = report["machine"]
    lines = [
        "# Benchmarks",
        "",
        f"Measured {report['date']} with `{report['command']}` ({'quick' if report['quick'] else 'full'} run, "
        f"{report['seconds']:.0f} s).",
        "",
        f"Machine: {m['cores']} cores, {m['cpu']}; Python {m['python']}, grpcio {m['grpcio']}; {m['os']}; "
        f"load generator {m['h2load']} and grpcio clients in separate processes, NameServer as "
        "`python -m namesrv_grpc` on loopback.",
        "",
        "Lookup throughput and latency are ratios to the gRPC health check (an RPC that does nothing) measured",
        "in the same run against the same server process with the same client. The machine is small and noisy:",
        "compare ratios, not absolute numbers.",
        "",
        "| # | scenario | target | measured | met |",
        "|---|---|---|---|---|",
    ]
    for key, result in report["scenarios"].items():
        title = SCENARIOS[key][0]
        if "error" in result:
            lines.append(f"| {key} | {title} | | error: {result['error']} | no |")
            continue
        lines.append(
            f"| {key} | {title} | {result['target']} | {summary(key, result)} | {'yes' if result['met'] else 'NO'} |"
        )
    lines += ["", "## Raw results", "", "```json", json.dumps(report["scenarios"], indent=2), "```", ""]
    return "\n".join(lines)


def summary(key: str, r: dict[str, Any]) -> str:
    """The one-line measured value of a scenario for the table."""
    if key in WATCH_SCENARIOS:
        return watch_summary(key, r)
    if key in ("1", "2"):
        lookup, empty = r["lookup"], r["empty_call"]
        rates = f"throughput {r['throughput_ratio']:.2f} x ({lookup['rps']:.0f} vs {empty['rps']:.0f} req/s)"
    if key == "1":
        return f"{rates}; p99 {r['p99_ratio']:.2f} x ({lookup['p99_ms']:.2f} vs {empty['p99_ms']:.2f} ms)"
    if key == "2":
        return (
            f"{rates}; RSS {r['rss_mib']} MiB with {r['brokers']} brokers, {r['topics']:,} topics, "
            f"{r['queue_datas']:,} QueueData (loaded in {r['load_seconds']} s)"
        )
    if key == "3":
        return (
            f"lookup p99 {r['lookup_p99_ms']} ms over {r['registrations']} registrations of a "
            f"{r['big_broker_topics']:,}-topic broker ({r['registration_ms_median']} ms each)"
        )
    if key == "4":
        sizes = [k for k in r if k.startswith("topics_")]
        return "; ".join(
            f"{int(k[7:]):,} topics ({r[k]['body_bytes'] / 2**20:.2f} MiB): {r[k]['latency_ms_median']} ms"
            for k in sizes
        )
    if key == "5":
        return (
            f"QueryDataVersion {r['query_data_version_ratio']:.2f} x, heartbeat {r['heartbeat_ratio']:.2f} x; "
            f"unchanged re-registration of {r['body_bytes'] / 2**20:.1f} MiB: "
            f"median {r['unchanged_reregistration_ms']} ms"
            f" vs transfer+checksum {r['transfer_plus_checksum_ms']} ms (fastest {r['unchanged_reregistration_ms_min']}"
            f" vs {r['transfer_plus_checksum_ms_min']} ms); server processing {r['server_processing_ms_mean']} ms"
            f" of which CRC32C {r['crc32c_of_body_ms']} ms: no decode, no table work"
        )
    if key == "6":
        return (
            f"{r['scan_ms_none_expired']} ms per scan with none expired; {r['expired']} removed in "
            f"{r['scan_ms_1000_expired']} ms, correct: {r['removals_correct']}"
        )
    if key == "7":
        return f"idle {r['idle_rss_mib']} MiB, loaded {r['loaded_rss_mib']} MiB"
    if key == "8":
        return (
            f"healthy NameServers {r['healthy_latency_ms_with_black_hole']} ms (without the black hole "
            f"{r['healthy_latency_ms_without_black_hole']} ms); rounds {r['round_ms']} ms with a "
            f"{r['register_timeout_ms']} ms timeout"
        )
    return json.dumps(r)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller and shorter (under 2 minutes)")
    parser.add_argument("--only", default="", help="comma-separated scenario numbers")
    parser.add_argument(
        "--out", type=Path, default=None, help="markdown file (default docs/benchmarks.md; quick: none)"
    )
    args = parser.parse_args(argv)
    keys = [k for k in SCENARIOS if not args.only or k in args.only.split(",")]
    started = time.perf_counter()
    results: dict[str, Any] = {}
    failed = False
    for key in keys:
        title, scenario = SCENARIOS[key]
        print(f"[{key}] {title} ...", flush=True)
        t0 = time.perf_counter()
        try:
            results[key] = scenario(args.quick)
        except Exception as exc:
            traceback.print_exc()
            results[key] = {"error": f"{type(exc).__name__}: {exc}", "met": False}
            failed = True
        print(f"[{key}] {time.perf_counter() - t0:.1f} s: {json.dumps(results[key])}", flush=True)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "make bench-quick" if args.quick else "make bench",
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "machine": machine(),
        "scenarios": results,
    }
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(exist_ok=True)
    name = "quick.json" if args.quick else "full.json"
    (results_dir / name).write_text(json.dumps(report, indent=2) + "\n")
    out = args.out or (None if args.quick else ROOT / "docs" / "benchmarks.md")
    if out is not None:
        out.parent.mkdir(exist_ok=True)
        out.write_text(render_markdown(report))
        print(f"wrote {out}")
    print(f"wrote {results_dir / name}")
    for key in keys:
        r = results[key]
        print(f"  {key}: {'met' if r.get('met') else 'NOT met'}  {summary(key, r) if 'error' not in r else r['error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
