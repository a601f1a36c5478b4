"""Benchmark plumbing: a real NameServer process, h2load as a C-speed gRPC load generator, and
request builders. Every figure is measured against a NameServer started as ``python -m namesrv_grpc``
on loopback, from a separate process."""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.core.body import encode_body
from namesrv_grpc.core.model import DataVersion, TopicConfig

ROOT = Path(__file__).resolve().parent.parent
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
PICKUP_TOPIC_ROUTE = "/namesrv.v1.NameServerService/PickupTopicRoute"


@dataclass
class Server:
    """A NameServer process on 127.0.0.1."""

    process: subprocess.Popen[str]
    port: int
    remoting_port: int = 0
    """RocketMQ remoting port (the boot line names both)."""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def remoting_address(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    def rss_bytes(self) -> int:
        """Resident set size of the server process, from /proc."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]

    def channel(self) -> grpc.Channel:
        options = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
        return grpc.insecure_channel(self.address, options=options)


@contextmanager
def namesrv(*extra: str) -> Iterator[Server]:
    """Start a NameServer (state in a temporary directory); stop it with SIGTERM afterwards."""
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        args = [
            sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
            "--log-level", "WARNING",
            "--kv-config-path", f"{tmp}/kvConfig.json", "--config-store-path", f"{tmp}/namesrv.properties", *extra,
        ]  # fmt: skip
        with open(f"{tmp}/stderr", "w") as stderr:
            process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT)
        assert process.stdout is not None
        line = process.stdout.readline()
        if "boot success" not in line:
            process.kill()
            raise RuntimeError(f"namesrv did not start: {line!r} {Path(tmp, 'stderr').read_text()}")
        ports = parse_boot_line(line)
        server = Server(process, ports["gRPC"], ports["remoting"])
        with server.channel() as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        try:
            yield server
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def grpc_frame(message: Message) -> bytes:
    """A gRPC length-prefixed message (uncompressed), as h2load sends it as the request body."""
    payload = message.SerializeToString()
    return struct.pack(">BI", 0, len(payload)) + payload


@dataclass(frozen=True)
class LoadResult:
    """What one h2load run measured: requests per second and latency percentiles in ms."""

    requests: int
    failed: int
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def h2load(address: str, path: str, message: Message, *, seconds: float, concurrency: int = 64) -> LoadResult:
    """Run h2load against ``path`` with ``concurrency`` streams in flight (4 connections), for
    ``seconds`` after a 1 s warm-up; percentiles from its per-request log."""
    binary = shutil.which("h2load")
    if binary is None:
        raise RuntimeError("h2load not found: run scripts/install-bench-tools.sh (Debian nghttp2-client)")
    connections = 4
    with tempfile.TemporaryDirectory(prefix="h2load-") as tmp:
        body = Path(tmp, "body")
        body.write_bytes(grpc_frame(message))
        log = Path(tmp, "log")
        args = [
            binary, f"http://{address}{path}", "-c", str(connections), "-m", str(concurrency // connections),
            "-D", str(max(1, round(seconds))), "--warm-up-time", "1", "-d", str(body), "--log-file", str(log),
            "-H", "content-type: application/grpc", "-H", "te: trailers",
        ]  # fmt: skip
        out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
        latencies = sorted(int(line.split("\t")[2]) / 1000 for line in log.read_text().splitlines() if line)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    if done is None or rps is None:
        raise RuntimeError(f"cannot read h2load's output:\n{out}")
    return LoadResult(
        requests=int(done.group(1)),
        failed=int(done.group(3)),
        rps=float(rps.group(1)),
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        max_ms=latencies[-1] if latencies else 0.0,
    )


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values (nearest rank)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return float(sorted_values[index])


def topic_configs(names: Sequence[str], queues: int = 8) -> dict[str, TopicConfig]:
    """Topic configs with ``queues`` read and write queues each."""
    return {name: TopicConfig(name, queues, queues) for name in names}


def register_request(
    broker_name: str,
    broker_addr: str,
    topics: dict[str, TopicConfig],
    *,
    broker_id: int = 0,
    version: DataVersion = DataVersion(0, 1, 1),
    cluster: str = "BenchCluster",
) -> ns_pb2.RegisterBrokerRequest:
    """A RegisterBrokerRequest with an encoded, checksummed body."""
    body, crc = encode_body(topics, version)
    return ns_pb2.RegisterBrokerRequest(
        cluster_name=cluster, broker_name=broker_name, broker_id=broker_id, broker_addr=broker_addr,
        body=body, body_crc32c=crc,
    )  # fmt: skip


def timed_calls(call: object, request: Message, count: int) -> list[float]:
    """Latencies (ms) of ``count`` sequential calls of a blocking stub method."""
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        call(request, timeout=60)  # type: ignore[operator]
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def machine() -> dict[str, str]:
    """Cores, CPU model, Python and grpcio versions, OS: what the numbers were measured on."""
    cpu = "unknown"
    with suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    h2 = (
        subprocess.run(["h2load", "--version"], capture_output=True, text=True).stdout.strip()
        if shutil.which("h2load")
        else "missing"
    )
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "os": platform.platform(),
        "h2load": h2,
    }
