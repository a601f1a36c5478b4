"""A gRPC load generator for requests that differ call by call (h2load sends one fixed body): several
worker processes, each with ``concurrency`` calls in flight over one grpc.aio channel, sending
pre-serialized requests (no protobuf work in the timed loop). Every answer is a real gRPC status:
a non-OK status is counted as an error, never as a success; every 50th answer is decoded and checked.

    python -m bench.grpc_load ADDRESS PATH REQUESTS --worker I --workers N [--seconds S] [--concurrency C]
        [--expect-brokers B] --latencies OUT

``REQUESTS`` holds length-prefixed serialized requests; worker I takes every N-th one starting at I.
Without ``--seconds`` each is sent once, in order (cold-cache runs); with it, the worker cycles
through them for S seconds. The worker connects, makes one untimed call, prints ``ready``, waits for a
line on stdin, runs, writes its latencies (ms, float64) to OUT and prints a JSON summary.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import json
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2

if TYPE_CHECKING:
    from bench.harness import LoadRun

# grpc_load imports bench.harness where it is called: a worker process never uses the harness's
# psutil, prometheus-client or the NameServer's CLI (as in bench.remoting_load).

CHECK_EVERY = 50


def write_requests(path: Path, requests: Sequence[bytes]) -> None:
    """Write ``requests`` as 4-byte big-endian length + bytes, one after the other."""
    with path.open("wb") as out:
        for request in requests:
            out.write(struct.pack(">I", len(request)) + request)


def read_requests(path: Path) -> list[bytes]:
    data, out, offset = path.read_bytes(), [], 0
    while offset < len(data):
        (length,) = struct.unpack_from(">I", data, offset)
        out.append(data[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return out


async def _run(args: argparse.Namespace, requests: list[bytes]) -> dict[str, Any]:
    latencies = array.array("d")
    errors: dict[str, int] = {}
    checked = 0
    async with grpc.aio.insecure_channel(args.address) as channel:
        method: Any = channel.unary_unary(args.path)
        with contextlib.suppress(grpc.aio.AioRpcError):  # untimed: the channel is connected (answers count later)
            await method(requests[0], timeout=30)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started, cpu_started = time.perf_counter(), time.process_time()
        deadline = started + args.seconds if args.seconds else None
        position = 0

        async def caller() -> None:
            nonlocal position, checked
            while True:
                if deadline is None:
                    if position >= len(requests):
                        return
                elif time.perf_counter() >= deadline:
                    return
                request = requests[position % len(requests)]
                position += 1
                sent = time.perf_counter()
                try:
                    response = await method(request, timeout=60)
                except grpc.aio.AioRpcError as error:
                    errors[error.code().name] = errors.get(error.code().name, 0) + 1
                    continue
                latencies.append((time.perf_counter() - sent) * 1000)
                if args.expect_brokers and len(latencies) % CHECK_EVERY == 1:
                    route = ns_pb2.PickupTopicRouteResponse.FromString(response).route
                    if len(route.queue_datas) != args.expect_brokers:
                        errors["WRONG_ROUTE"] = errors.get("WRONG_ROUTE", 0) + 1
                    checked += 1

        await asyncio.gather(*(caller() for _ in range(args.concurrency)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    await asyncio.to_thread(Path(args.latencies).write_bytes, latencies.tobytes())
    return {"ok": len(latencies), "errors": errors, "seconds": wall, "cpu_seconds": cpu, "checked": checked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.grpc_load", description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("path")
    parser.add_argument("requests", type=Path)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--expect-brokers", type=int, default=0)
    parser.add_argument("--latencies", required=True)
    args = parser.parse_args(argv)
    every = read_requests(args.requests)
    requests = every[args.worker :: args.workers] or every
    print(json.dumps(asyncio.run(_run(args, requests))), flush=True)
    return 0


def grpc_load(
    address: str,
    path: str,
    requests: Sequence[bytes],
    *,
    server_pid: int,
    processes: int = 2,
    concurrency: int = 32,
    seconds: float = 0.0,
    expect_brokers: int = 0,
) -> LoadRun:
    """Drive ``path`` with ``requests`` from ``processes`` worker processes (see the module doc);
    server CPU from /proc over the timed span; the workers' CPU as they report it. Raises
    BenchError when any answer was not OK."""
    from bench.harness import BenchError, LoadRun, cpu_seconds, percentile, start_workers

    with tempfile.TemporaryDirectory(prefix="grpc-load-") as tmp:
        requests_path = Path(tmp, "requests")
        write_requests(requests_path, requests)
        commands = [
            [
                sys.executable, "-m", "bench.grpc_load", address, path, str(requests_path), "--worker", str(index),
                "--workers", str(processes), "--seconds", str(seconds), "--concurrency", str(concurrency),
                "--expect-brokers", str(expect_brokers), "--latencies", f"{tmp}/latencies-{index}",
            ]
            for index in range(processes)
        ]  # fmt: skip
        workers = start_workers(commands, "gRPC")
        try:
            cpu_before, started = cpu_seconds(server_pid), time.perf_counter()
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            summaries = []
            for worker in workers:
                assert worker.stdout is not None
                summaries.append(json.loads(worker.stdout.readline()))
            wall, server_cpu = time.perf_counter() - started, cpu_seconds(server_pid) - cpu_before
        finally:
            for worker in workers:
                try:
                    worker.wait(60)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)
        latencies: list[float] = []
        for index in range(processes):
            values = array.array("d")
            values.frombytes(Path(tmp, f"latencies-{index}").read_bytes())
            latencies.extend(values)
    errors: dict[str, int] = {}
    for summary in summaries:
        for code, count in summary["errors"].items():
            errors[code] = errors.get(code, 0) + count
    if errors:
        raise BenchError(f"gRPC load on {path}: error answers {errors}")
    latencies.sort()
    ok = sum(s["ok"] for s in summaries)
    return LoadRun(
        requests=ok,
        grpc_ok=ok,
        rps=ok / wall,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        max_ms=latencies[-1] if latencies else 0.0,
        wall_seconds=wall,
        server_cpu_seconds=server_cpu,
        loadgen_cpu_seconds=sum(s["cpu_seconds"] for s in summaries),
        loadgen=f"{processes} grpc.aio processes x {concurrency} calls in flight",
        extra={"checked_answers": sum(s["checked"] for s in summaries), "loadgen_processes": processes},
    )


if __name__ == "__main__":
    sys.exit(main())
