"""Route lookups against the physical limit of our stack: server CPU per ``PickupTopicRoute`` of the
real NameServer versus a bare ``grpc.aio`` generic handler (no interceptors, no request parsing)
returning the very same response bytes, both driven by h2load in the same run.

    python -m bench.lookup_limit [--requests N]        # prints JSON; `make bench` runs it as a scenario

CPU is the server process's user + system time from ``/proc/PID/stat`` over a run of exactly N
requests (after a separate warm-up run), so h2load's own CPU and idle time do not count. The ratio
is bare CPU per request / NameServer CPU per request: 1.0 = the lookup costs nothing beyond gRPC
itself; the goal is >= 0.9.

The two servers are measured in alternating rounds. On a shared machine other processes only ever
add CPU time to a run (cache and scheduler interference), never remove it, so the ratio is taken
from each server's lowest CPU per request over the rounds (the least disturbed run); the median of
the per-round ratios (each round's two runs are adjacent in time, so they share its disturbance)
and the ratio of the medians are reported too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from bench.harness import ROOT, grpc_frame, namesrv, register_request, topic_configs, tree_pids
from namesrv.v1 import name_server_service_pb2 as ns_pb2

PICKUP_TOPIC_ROUTE = "/namesrv.v1.NameServerService/PickupTopicRoute"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and every live process under it (``namesrv``'s
    route-table and serving processes), from /proc/PID/stat."""
    total = 0
    for one in tree_pids(pid):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it exited meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


@dataclass(frozen=True)
class CpuRun:
    """One h2load run of exactly ``requests`` requests: server CPU, wall time, failures."""

    requests: int
    failed: int
    cpu_seconds: float
    wall_seconds: float

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_seconds / max(1, self.requests - self.failed) * 1e6

    def as_dict(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "failed": self.failed,
            "cpu_seconds": round(self.cpu_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "cpu_us_per_request": round(self.cpu_us_per_request, 2),
            "rps": round(self.requests / self.wall_seconds, 1) if self.wall_seconds else 0.0,
        }


def h2load_cpu(pid: int, address: str, path: str, message: Message, requests: int, concurrency: int = 64) -> CpuRun:
    """Send exactly ``requests`` requests (4 connections, ``concurrency`` streams in flight) and
    measure the server's CPU over the run. Raises RuntimeError when h2load is missing."""
    binary = shutil.which("h2load")
    if binary is None:
        raise RuntimeError("h2load not found: run scripts/install-bench-tools.sh (Debian nghttp2-client)")
    with tempfile.TemporaryDirectory(prefix="h2load-") as tmp:
        body = Path(tmp, "body")
        body.write_bytes(grpc_frame(message))
        args = [
            binary, f"http://{address}{path}", "-n", str(requests), "-c", "4", "-m", str(concurrency // 4),
            "-d", str(body), "-H", "content-type: application/grpc", "-H", "te: trailers",
        ]  # fmt: skip
        before = cpu_seconds(pid)
        out = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True).stdout
        used = cpu_seconds(pid) - before
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    took = re.search(r"finished in ([\d.]+)(m?s)", out)
    if done is None or took is None:
        raise RuntimeError(f"cannot read h2load's output:\n{out}")
    wall = float(took.group(1)) / (1000 if took.group(2) == "ms" else 1)
    # gRPC errors come back as HTTP 200 with grpc-status in the trailers: h2load counts them as
    # succeeded, so the caller checks the answer with a real client first.
    return CpuRun(int(done.group(1)), int(done.group(3)), used, wall)


# ---------------------------------------------------------------------- the bare handler


def serve_bare(response_file: str) -> None:
    """Serve ``PickupTopicRoute`` from a bare ``grpc.aio`` generic handler that returns the bytes in
    ``response_file`` (no interceptors, no parsing); print the port, run until killed."""
    import grpc

    response = Path(response_file).read_bytes()

    async def pickup(request: bytes, context: Any) -> bytes:
        return response

    async def main() -> None:
        server = grpc.aio.server()
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "PickupTopicRoute": grpc.unary_unary_rpc_method_handler(pickup)
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("namesrv.v1.NameServerService", handlers),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


@contextmanager
def bare_server(response: bytes) -> Iterator[tuple[int, str]]:
    """A bare-handler server process answering ``response``: yields (pid, address)."""
    with tempfile.TemporaryDirectory(prefix="bare-") as tmp:
        path = Path(tmp, "response")
        path.write_bytes(response)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + str(ROOT))
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.lookup_limit", "--serve-bare", str(path)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        try:
            assert process.stdout is not None
            port = int(process.stdout.readline())
            yield process.pid, f"127.0.0.1:{port}"
        finally:
            process.kill()
            process.wait(10)


# ---------------------------------------------------------------------- the measurement


def measure(requests: int = 10_000, rounds: int = 7) -> dict[str, Any]:
    """CPU per lookup of the NameServer and of the bare handler, alternating ``rounds`` runs of
    ``requests`` requests each, after a warm-up run each; the ratio of the lowest and of the medians."""
    topics = topic_configs([f"LimitTopic{i}" for i in range(8)], queues=8)
    request = ns_pb2.PickupTopicRouteRequest(topic="LimitTopic3")
    real: list[CpuRun] = []
    bare: list[CpuRun] = []
    with namesrv() as server:
        from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc

        with server.channel() as channel:
            stub = ns_grpc.NameServerServiceStub(channel)
            for index in range(2):  # a master and a slave of two broker names: a realistic route
                for broker_id in (0, 1):
                    addr = f"127.0.0.1:{20911 + 10 * index + broker_id}"
                    stub.RegisterBroker(
                        register_request(f"broker-{index}", addr, topics, broker_id=broker_id), timeout=30
                    )
            answer = stub.PickupTopicRoute(request, timeout=10)
        response = answer.SerializeToString()
        with bare_server(response) as (bare_pid, bare_address):
            targets = [(server.process.pid, server.address, real), (bare_pid, bare_address, bare)]
            for pid, address, _ in targets:
                h2load_cpu(pid, address, PICKUP_TOPIC_ROUTE, request, requests)
            for _ in range(rounds):
                for pid, address, runs in targets:
                    runs.append(h2load_cpu(pid, address, PICKUP_TOPIC_ROUTE, request, requests))
    real_sorted = sorted(r.cpu_us_per_request for r in real)
    bare_sorted = sorted(r.cpu_us_per_request for r in bare)
    ratio = bare_sorted[0] / real_sorted[0]
    round_ratios = sorted(b.cpu_us_per_request / r.cpu_us_per_request for b, r in zip(bare, real, strict=True))
    return {
        "target": ">= 0.9 (bare handler CPU per request / NameServer CPU per request)",
        "ratio": round(ratio, 3),
        "median_of_round_ratios": round(round_ratios[len(round_ratios) // 2], 3),
        "ratio_of_medians": round(bare_sorted[len(bare) // 2] / real_sorted[len(real) // 2], 3),
        "namesrv_cpu_us_per_request": round(real_sorted[0], 2),
        "bare_cpu_us_per_request": round(bare_sorted[0], 2),
        "namesrv_cpu_us_per_request_median": round(real_sorted[len(real) // 2], 2),
        "bare_cpu_us_per_request_median": round(bare_sorted[len(bare) // 2], 2),
        "response_bytes": len(response),
        "namesrv_runs": [r.as_dict() for r in real],
        "bare_runs": [r.as_dict() for r in bare],
        "met": ratio >= 0.9,
    }


def scenario(quick: bool) -> dict[str, Any]:
    """The ``make bench`` scenario: 7 rounds of 10,000 requests per server (quick: 3 of 5,000)."""
    return measure(5_000, 3) if quick else measure(10_000, 7)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.lookup_limit", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="requests per measured run")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--serve-bare", metavar="RESPONSE_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return 0
    print(json.dumps(measure(args.requests, args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
