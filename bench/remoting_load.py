"""Load generators for the remoting port (RocketMQ's TCP protocol), run as worker processes.

``blast`` (throughput): each worker opens ``--connections`` connections and keeps ``--depth``
GET_ROUTEINFO_BY_TOPIC requests in flight on each, pipelined: frames are encoded once before the
run and sent in batches of ``depth / 2`` whenever half of a batch has been answered; answers are
counted by walking the frame lengths, and every answer's header must start with
``{"code":0,`` (SUCCESS, as the NameServer writes JSON headers) or it counts as an error. No
per-request Python object is built, so one worker answers for far more requests per CPU second
than the server spends on them.

``latency``: each worker runs ``--concurrency`` sequential callers over one
:class:`~namesrv_grpc.client.remoting.RemotingClient` connection each and records every
request's latency (ms).

``trace``: the worker's share (every ``--workers``-th operation) of a route workload's trace (a
JSON file ``{"workload": {...}, "seed": N}``, see :mod:`bench.route_workloads`; frames are built
before the run), run closed-loop over ``--connections`` connections with one request in flight on each (so
``--connections`` in flight in all), every latency recorded; an answer counts as an error unless
SUCCESS (the mxsm/rocketmq-rust route workloads, ``bench/java_peer.py``).

    python -m bench.remoting_load {blast|latency|trace} HOST:PORT FILE --seconds S --latencies OUT ...

Workers connect, print ``ready``, wait for a line on stdin, run, and print a JSON summary.
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

from bench.route_workloads import Workload
from bench.route_workloads import frames as route_frames
from bench.route_workloads import trace as route_trace
from namesrv_grpc.client.remoting import RemotingClient
from namesrv_grpc.remoting.codec import RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from bench.harness import LoadRun

# The benchmark's side (remoting_load, trace_load) imports bench.harness where it is called: the
# harness pulls in grpc, psutil, prometheus-client and the NameServer's CLI, which a worker process
# never uses (a worker starts with 0.25 instead of 0.67 CPU-s of imports; a tiny J1 run starts 18).

SUCCESS_PREFIX = b'{"code":0,'
_LENGTH = struct.Struct(">I")


def lookup_frame(topic: str, opaque: int) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC request frame (JSON header, as the Java client sends it)."""
    return encode_command(
        RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque, ext_fields={"topic": topic}, language="JAVA")
    )


class _Blaster(asyncio.Protocol):
    def __init__(self, batches: list[bytes], batch_size: int, depth: int, deadline: float, done: asyncio.Event) -> None:
        self.batches, self.batch_size, self.depth, self.deadline, self.done = batches, batch_size, depth, deadline, done
        self.buffer = bytearray()
        self.in_flight = 0
        self.answered = 0
        self.errors = 0
        self.next_batch = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        while self.in_flight < self.depth:
            self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.transport.write(self.batches[self.next_batch % len(self.batches)])
        self.next_batch += 1
        self.in_flight += self.batch_size

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        offset, end, answered = 0, len(buffer), 0
        while end - offset >= 4:
            (length,) = _LENGTH.unpack_from(buffer, offset)
            if end - offset < 4 + length:
                break
            if buffer[offset + 8 : offset + 8 + len(SUCCESS_PREFIX)] != SUCCESS_PREFIX:
                self.errors += 1
            answered += 1
            offset += 4 + length
        del buffer[:offset]
        self.answered += answered
        self.in_flight -= answered
        if time.perf_counter() >= self.deadline:
            if self.in_flight == 0 and self.transport is not None:
                self.transport.close()
                self.done.set()
            return
        while self.in_flight <= self.depth - self.batch_size:
            self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set()


async def _blast(args: argparse.Namespace, topics: list[str]) -> dict[str, Any]:
    host, port = args.address.rsplit(":", 1)
    batch_size = max(1, args.depth // 2)
    frames = [lookup_frame(topics[i % len(topics)], i) for i in range(max(len(topics), 4 * args.depth))]
    batches = [b"".join(frames[i : i + batch_size]) for i in range(0, len(frames) - batch_size + 1, batch_size)]
    loop = asyncio.get_running_loop()
    # One untimed request: the server is up and the connection path warm.
    async with await RemotingClient.connect(host, int(port)) as client:
        await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[0]}, timeout=30)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    started, cpu_started = time.perf_counter(), time.process_time()
    deadline = started + args.seconds
    protocols = []
    for _ in range(args.connections):
        blaster = _Blaster(batches, batch_size, args.depth, deadline, asyncio.Event())
        await loop.create_connection(lambda blaster=blaster: blaster, host, int(port))  # type: ignore[misc]
        protocols.append(blaster)
    await asyncio.gather(*(p.done.wait() for p in protocols))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "ok": sum(p.answered - p.errors for p in protocols),
        "errors": sum(p.errors for p in protocols),
        "seconds": wall,
        "cpu_seconds": cpu,
    }


async def _latency(args: argparse.Namespace, topics: list[str]) -> dict[str, Any]:
    host, port = args.address.rsplit(":", 1)
    clients = [await RemotingClient.connect(host, int(port)) for _ in range(args.concurrency)]
    latencies = array.array("d")
    errors = 0
    try:
        for client in clients:
            await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[0]}, timeout=30)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started, cpu_started = time.perf_counter(), time.process_time()
        deadline = started + args.seconds

        async def caller(client: RemotingClient, offset: int) -> None:
            nonlocal errors
            position = offset
            while time.perf_counter() < deadline:
                topic = topics[position % len(topics)]
                position += len(clients)
                sent = time.perf_counter()
                answer = await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=60)
                if answer.code != ResponseCode.SUCCESS:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - sent) * 1000)

        await asyncio.gather(*(caller(c, i) for i, c in enumerate(clients)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        for client in clients:
            await client.close()
    await asyncio.to_thread(Path(args.latencies).write_bytes, latencies.tobytes())
    return {"ok": len(latencies), "errors": errors, "seconds": wall, "cpu_seconds": cpu}


class _Tracer(asyncio.Protocol):
    """One connection of a ``trace`` run: sends the next frame when the answer to the last came."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.entries: list[int] = []
        self.latencies: array.array[float] = array.array("d")
        self.buffer = bytearray()
        self.errors = 0
        self.response_bytes = 0
        self.first_error = ""
        self.sent_at = 0.0
        self.done = asyncio.Event()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def load(self, frames: list[bytes], entries: list[int], latencies: array.array[float]) -> None:
        """The frames to send next, in the order ``entries.pop()`` gives them."""
        self.frames, self.entries, self.latencies = frames, entries, latencies
        self.done = asyncio.Event()

    def start(self) -> None:
        self._next()

    def _next(self) -> None:
        assert self.transport is not None
        if not self.entries:  # the connection stays open until every tracer is done: closing it would
            self.done.set()  # drop the brokers re-registered over it (S15) while others still look up
            return
        self.sent_at = time.perf_counter()
        self.transport.write(self.frames[self.entries.pop()])

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if len(buffer) < 4:
            return
        (length,) = _LENGTH.unpack_from(buffer, 0)
        if len(buffer) < 4 + length:
            return
        self.latencies.append((time.perf_counter() - self.sent_at) * 1000)
        (header_length,) = _LENGTH.unpack_from(buffer, 4)
        if buffer[8 : 8 + len(SUCCESS_PREFIX)] != SUCCESS_PREFIX:
            self.errors += 1
            if not self.first_error:
                self.first_error = bytes(buffer[8 : 8 + min(300, header_length & 0xFFFFFF)]).decode("utf-8", "replace")
        self.response_bytes += length - 4 - (header_length & 0xFFFFFF)
        del buffer[: 4 + length]
        self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.entries:
            self.errors += len(self.entries)
            self.entries.clear()
        self.done.set()


def write_trace(path: Path, workload: Workload, seed: int, warmup_operations: int = 0) -> None:
    """Write a ``trace`` file: the workload, the seed of its trace, and how many lookups (no writes) each
    worker sends untimed first, over the same connections."""
    spec = {"workload": workload.as_dict(), "seed": seed, "warmup_operations": warmup_operations}
    path.write_text(json.dumps(spec))


async def _trace(args: argparse.Namespace, spec: dict[str, Any]) -> dict[str, Any]:
    host, port = args.address.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    tracers = []
    for _ in range(args.connections):
        tracer = _Tracer()
        await loop.create_connection(lambda tracer=tracer: tracer, host, int(port))  # type: ignore[misc]
        tracers.append(tracer)

    def load(workload: Workload, seed: int, latencies: array.array[float]) -> None:
        frames, mine = route_frames(workload, route_trace(workload, seed)[args.worker :: args.workers])
        for index, tracer in enumerate(tracers):
            tracer.load(frames, mine[index :: args.connections][::-1], latencies)  # popped from the end

    async def run() -> None:
        for tracer in tracers:
            tracer.start()
        await asyncio.gather(*(t.done.wait() for t in tracers))

    # Warm-up (untimed, lookups only, so no broker is re-registered over these connections).
    warm = spec.get("warmup_operations", 0)
    if warm:
        reads = {"write_percent": 0, "operations": warm}
        load(Workload(**{**spec["workload"], **reads}), spec["seed"] ^ 0xA5A5A5A5, array.array("d"))
        await run()
    for tracer in tracers:
        tracer.errors, tracer.response_bytes = 0, 0
    latencies: array.array[float] = array.array("d")
    load(Workload(**spec["workload"]), spec["seed"], latencies)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    started, cpu_started = time.perf_counter(), time.process_time()
    await run()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    await asyncio.to_thread(Path(args.latencies).write_bytes, latencies.tobytes())
    errors = sum(t.errors for t in tracers)
    summary = {
        "ok": len(latencies) - errors,
        "errors": errors,
        "seconds": wall,
        "cpu_seconds": cpu,
        "response_bytes": sum(t.response_bytes for t in tracers),
        "first_error": next((t.first_error for t in tracers if t.first_error), ""),
    }
    # Connections close only when every worker is done (a line on stdin): a closed connection drops
    # the brokers re-registered over it (S15) while other workers still look their topics up.
    print(json.dumps(summary), flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    for tracer in tracers:
        if tracer.transport is not None:
            tracer.transport.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.remoting_load", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["blast", "latency", "trace"])
    parser.add_argument("address")
    parser.add_argument("topics", type=Path)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latencies", default="")
    args = parser.parse_args(argv)
    if args.mode == "trace":  # prints its summary itself, before closing its connections
        asyncio.run(_trace(args, json.loads(args.topics.read_text())))
        return 0
    every = args.topics.read_text().split()
    topics = every[args.worker :: args.workers] or every
    run = _blast if args.mode == "blast" else _latency
    print(json.dumps(asyncio.run(run(args, topics))), flush=True)
    return 0


def remoting_handled(metrics_url: str | None) -> dict[str, float]:
    """``namesrv_remoting_requests_total`` of GET_ROUTEINFO_BY_TOPIC by response code (nothing
    without a metrics URL: a peer such as the Java NameServer)."""
    from bench.harness import scrape

    counts: dict[str, float] = {}
    if metrics_url is None:
        return counts
    for labels, value in scrape(metrics_url).get("namesrv_remoting_requests_total", []):
        if labels.get("request_code") == "GET_ROUTEINFO_BY_TOPIC":
            counts[labels["response_code"]] = counts.get(labels["response_code"], 0.0) + value
    return counts


def remoting_load(
    mode: str,
    address: str,
    topics: Sequence[str],
    *,
    server_pid: int,
    metrics_url: str | None,
    seconds: float,
    processes: int = 2,
    connections: int = 2,
    depth: int = 64,
    concurrency: int = 8,
) -> LoadRun:
    """Run ``processes`` workers in ``mode`` against the remoting port at ``address``; server CPU from
    /proc over the timed span, the workers' CPU as they report it. Raises BenchError when an answer
    was not SUCCESS (by the workers' count or, given ``metrics_url``, by the server's
    ``namesrv_remoting_requests_total``)."""
    from bench.harness import BenchError, LoadRun, cpu_seconds, percentile, start_workers

    with tempfile.TemporaryDirectory(prefix="remoting-load-") as tmp:
        topics_path = Path(tmp, "topics")
        topics_path.write_text("\n".join(topics))
        commands = [
            [
                sys.executable, "-m", "bench.remoting_load", mode, address, str(topics_path), "--worker", str(index),
                "--workers", str(processes), "--seconds", str(seconds), "--connections", str(connections),
                "--depth", str(depth), "--concurrency", str(concurrency), "--latencies", f"{tmp}/latencies-{index}",
            ]
            for index in range(processes)
        ]  # fmt: skip
        workers = start_workers(commands, "remoting")
        try:
            handled_before = remoting_handled(metrics_url)
            cpu_before, started = cpu_seconds(server_pid), time.perf_counter()
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            summaries = []
            for worker in workers:
                assert worker.stdout is not None
                line = worker.stdout.readline()
                if not line:
                    raise BenchError("a remoting load worker died")
                summaries.append(json.loads(line))
            wall, server_cpu = time.perf_counter() - started, cpu_seconds(server_pid) - cpu_before
            handled_after = remoting_handled(metrics_url)
        finally:
            for worker in workers:
                try:
                    worker.wait(60)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)
        latencies: list[float] = []
        if mode == "latency":
            for index in range(processes):
                values = array.array("d")
                values.frombytes(Path(tmp, f"latencies-{index}").read_bytes())
                latencies.extend(values)
    errors = sum(s["errors"] for s in summaries)
    delta = {code: handled_after.get(code, 0.0) - handled_before.get(code, 0.0) for code in handled_after}
    server_errors = {code: n for code, n in delta.items() if code != "SUCCESS" and n}
    ok = sum(s["ok"] for s in summaries)
    if errors or server_errors or (metrics_url is not None and delta.get("SUCCESS", 0) < ok):
        raise BenchError(f"remoting {mode}: {errors} error answers, server counted {delta}")
    latencies.sort()
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
        loadgen=(
            f"{processes} processes x {connections} connections x {depth} pipelined requests"
            if mode == "blast"
            else f"{processes} processes x {concurrency} RemotingClient connections, 1 request in flight each"
        ),
        extra={"loadgen_processes": processes},
    )


def trace_load(
    address: str, trace_path: Path, *, server_pid: int, processes: int = 2, connections: int = 16
) -> tuple[LoadRun, int]:
    """Run a ``trace`` file (:func:`write_trace`) with ``processes`` workers sharing ``connections``
    connections (one request in flight on each) against ``address``. Returns the run (requests/s =
    requests of the trace / wall time until the last answer; server CPU from /proc) and the response
    body bytes received. Raises BenchError when an answer was not SUCCESS."""
    from bench.harness import BenchError, LoadRun, cpu_seconds, percentile, start_workers

    share = max(1, connections // processes)
    with tempfile.TemporaryDirectory(prefix="remoting-trace-") as tmp:
        commands = [
            [
                sys.executable, "-m", "bench.remoting_load", "trace", address, str(trace_path), "--worker", str(index),
                "--workers", str(processes), "--seconds", "0", "--connections", str(share),
                "--latencies", f"{tmp}/latencies-{index}",
            ]
            for index in range(processes)
        ]  # fmt: skip
        workers = start_workers(commands, "remoting trace")
        try:
            cpu_before, started = cpu_seconds(server_pid), time.perf_counter()
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            summaries = []
            for worker in workers:
                assert worker.stdout is not None
                line = worker.stdout.readline()
                if not line:
                    raise BenchError("a remoting trace worker died")
                summaries.append(json.loads(line))
            wall, server_cpu = time.perf_counter() - started, cpu_seconds(server_pid) - cpu_before
        finally:
            for worker in workers:  # now they may close their connections
                with contextlib.suppress(OSError, ValueError):
                    assert worker.stdin is not None
                    worker.stdin.write("done\n")
                    worker.stdin.flush()
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
    errors = sum(s["errors"] for s in summaries)
    if errors:
        first = next((s["first_error"] for s in summaries if s["first_error"]), "")
        raise BenchError(f"remoting trace against {address}: {errors} answers were not SUCCESS, e.g. {first}")
    latencies.sort()
    ok = sum(s["ok"] for s in summaries)
    wall = max(s["seconds"] for s in summaries)
    run = LoadRun(
        requests=ok,
        grpc_ok=ok,
        rps=ok / wall,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        max_ms=latencies[-1] if latencies else 0.0,
        wall_seconds=wall,
        server_cpu_seconds=server_cpu,
        loadgen_cpu_seconds=sum(s["cpu_seconds"] for s in summaries),
        loadgen=f"{processes} processes x {share} connections, 1 request in flight each",
        extra={"p95_ms": percentile(latencies, 95), "p999_ms": percentile(latencies, 99.9)},
    )
    return run, sum(s["response_bytes"] for s in summaries)


if __name__ == "__main__":
    sys.exit(main())
