"""Benchmark plumbing: a real NameServer process, h2load as a C-speed gRPC load generator whose
successes are checked against gRPC status codes, CPU accounting from /proc, run profiles and the
row format of docs/benchmarks.md. Every figure is measured against a NameServer started as
``python -m namesrv_grpc`` on loopback, from separate processes."""

from __future__ import annotations

import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc
import psutil
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.runtime.policy import default_worker_processes
from namesrv_grpc.wire.grpc_register_body import encode_body

ROOT = Path(__file__).resolve().parent.parent
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
PICKUP_TOPIC_ROUTE = "/namesrv.v1.NameServerService/PickupTopicRoute"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CUT_OFF_CODES = {"CANCELLED", "CANCELED", "UNKNOWN"}
"""Status codes of calls h2load abandons at the end of its run (go-grpc and Python spellings)."""
Result = dict[str, Any]


class BenchError(RuntimeError):
    """A measurement that cannot be trusted (an error reply, a missing tool, a wrong answer)."""


# ---------------------------------------------------------------------------- run profiles


@dataclass(frozen=True)
class Profile:
    """How big and how long: ``full`` (``make bench``, the figures in docs/benchmarks.md), ``quick``
    (``make bench-quick``, under 3 minutes) or ``tiny`` (tests/test_bench.py: every code path of a
    scenario, seconds each, numbers meaningless). ``repeats`` is the number of repeated runs every
    row reports its min / median / max over."""

    name: Literal["full", "quick", "tiny"]

    @property
    def quick(self) -> bool:
        return self.name != "full"

    @property
    def repeats(self) -> int:
        return 3

    @property
    def warm_up(self) -> float:
        """Seconds h2load runs before it starts counting."""
        return float(self.pick(1.0, 0.5, 0.0))

    def pick(self, full: Any, quick: Any, tiny: Any) -> Any:
        """The value for this profile."""
        return {"full": full, "quick": quick, "tiny": tiny}[self.name]


# ---------------------------------------------------------------------------- rows


def spread(values: Sequence[float]) -> dict[str, float]:
    """min / median / max of repeated runs."""
    return {"min": min(values), "median": float(statistics.median(values)), "max": max(values)}


def row(
    row_id: str,
    what: str,
    sample: str,
    metrics: Mapping[str, Sequence[float]],
    *,
    baseline: str,
    baseline_metrics: Mapping[str, Sequence[float]] | None = None,
    target: str = "",
    met: bool | None = None,
    note: str = "",
) -> Result:
    """One row of the results table: what ran, the sample size of one run, every metric over the
    repeated runs (raw values kept, so the spread is visible), the baseline in words (and measured,
    when it is), the target and whether it was met (None: no target, reported only)."""
    return {
        "id": row_id,
        "what": what,
        "sample": sample,
        "runs": {k: [round(v, 4) for v in vs] for k, vs in metrics.items()},
        "baseline": baseline,
        "baseline_runs": {k: [round(v, 4) for v in vs] for k, vs in (baseline_metrics or {}).items()},
        "target": target,
        "met": met,
        "note": note,
    }


def size_text(size: int) -> str:
    """A byte count as MiB or KiB, whichever reads better."""
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 1024:.1f} KiB"


# ---------------------------------------------------------------------------- processes and CPU


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and every process under it (all their threads): for
    ``namesrv``, the supervisor, the route-table process and every serving process."""
    total = 0.0
    for one in tree_pids(pid):
        with suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def tree_pids(pid: int) -> list[int]:
    """``pid`` and every live process under it (children, their children, ...)."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [pid]


def tree_memory_bytes(pid: int) -> int:
    """Memory of a process and every process under it: the sum of their proportional set sizes (PSS:
    pages shared by several processes, such as the interpreter and libraries of ``namesrv``'s
    processes, counted once in all), the figure to hold against one Java process's RSS."""
    total = 0
    for one in tree_pids(pid):
        with suppress(psutil.Error):
            total += psutil.Process(one).memory_full_info().pss
    return total


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's waited-for children (h2load, load processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, from /proc/loadavg."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Server:
    """A NameServer process on 127.0.0.1: gRPC port, metrics port, remoting port (0: none)."""

    process: subprocess.Popen[str]
    port: int
    metrics_port: int
    remoting_port: int = 0
    stderr_path: Path | None = None
    """Where the server's log goes."""
    workers: int = 1
    """Its serving processes (from the boot line)."""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_size(self) -> int:
        """Bytes the server has logged so far (0 when unknown)."""
        return self.stderr_path.stat().st_size if self.stderr_path is not None else 0

    @property
    def remoting_address(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def rss_bytes(self) -> int:
        """Memory of the server: the PSS summed over ``namesrv`` and its processes (:func:`tree_memory_bytes`)."""
        return tree_memory_bytes(self.process.pid)

    def channel(self) -> grpc.Channel:
        options = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
        return grpc.insecure_channel(self.address, options=options)


@contextmanager
def namesrv(*extra: str) -> Iterator[Server]:
    """Start a NameServer (state in a temporary directory; gRPC, remoting and metrics on free ports);
    stop it with SIGTERM afterwards."""
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        args = [
            sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--log-level", "WARNING",
            "--kv-config-path", f"{tmp}/kvConfig.json", "--config-store-path", f"{tmp}/namesrv.properties",
            "--metrics-port", str(metrics_port), "--remoting-port", "0", *extra,
        ]  # fmt: skip
        with open(f"{tmp}/stderr", "w") as stderr:
            process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT)
        assert process.stdout is not None
        line = process.stdout.readline()
        if "boot success" not in line:
            process.kill()
            raise BenchError(f"namesrv did not start: {line!r} {Path(tmp, 'stderr').read_text()}")
        ports = parse_boot_line(line)
        server = Server(
            process, ports["gRPC"], metrics_port, ports.get("remoting", 0), Path(tmp, "stderr"),
            ports.get("serving processes", 1),
        )  # fmt: skip
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
                process.wait(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text at ``url`` as sample name -> [(labels, value)]."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


@dataclass(frozen=True)
class Pauses:
    """Cumulative ``namesrv_gc_pause_seconds`` (all generations) and ``namesrv_event_loop_lag_seconds``
    buckets of one scrape: upper bound (s) -> count."""

    gc: dict[float, float]
    lag: dict[float, float]

    @classmethod
    def read(cls, metrics_url: str) -> Pauses:
        samples = scrape(metrics_url)

        def buckets(name: str) -> dict[float, float]:
            out: dict[float, float] = {}
            for labels, value in samples.get(name, []):
                bound = float(labels["le"])
                out[bound] = out.get(bound, 0.0) + value
            return out

        return cls(buckets("namesrv_gc_pause_seconds_bucket"), buckets("namesrv_event_loop_lag_seconds_bucket"))

    def since(self, before: Pauses) -> PauseFigures:
        """What happened between ``before`` and this scrape."""

        def delta(now: dict[float, float], then: dict[float, float]) -> list[tuple[float, float]]:
            return [(bound, now[bound] - then.get(bound, 0.0)) for bound in sorted(now)]

        gc = delta(self.gc, before.gc)
        lag = delta(self.lag, before.lag)
        total_gc = gc[-1][1] if gc else 0.0
        longest = next((bound for bound, count in gc if count == total_gc), 0.0) if total_gc else 0.0
        previous = max((bound for bound, count in gc if count < total_gc), default=0.0)
        over_20ms = total_gc - next((count for bound, count in gc if bound >= 0.02), total_gc)
        total_lag = lag[-1][1] if lag else 0.0
        lag_p99 = next((bound for bound, count in lag if count >= 0.99 * total_lag), 0.0) if total_lag else 0.0
        return PauseFigures(
            collections=total_gc,
            longest_gc_ms=(previous * 1000, longest * 1000),
            gc_over_20ms=over_20ms,
            loop_lag_p99_ms=lag_p99 * 1000,
            lag_ticks=total_lag,
        )


@dataclass(frozen=True)
class PauseFigures:
    """Garbage collections and loop lag over a span, from the server's histograms: the longest
    pause lies in ``(longest_gc_ms[0], longest_gc_ms[1]]`` (its histogram bucket); the loop lag's
    p99 is the upper bound of its bucket."""

    collections: float
    longest_gc_ms: tuple[float, float]
    gc_over_20ms: float
    loop_lag_p99_ms: float
    lag_ticks: float


LOOKUP_TAIL_TARGET = (
    "per run p99 <= max(2 x, +10 ms) of the quiet run before it (median over runs); no lookup over 100 ms"
)


def tail_met(runs: list[float], quiet: list[float], max_ms: list[float]) -> bool:
    """:data:`LOOKUP_TAIL_TARGET` (issue 21): the median of p99 / max(2 x quiet, quiet + 10 ms) is at
    most 1 and the slowest lookup of every run took at most 100 ms."""
    allowed = [p99 / max(2 * q, q + 10) for p99, q in zip(runs, quiet, strict=True)]
    return median(allowed) <= 1 and max(max_ms) <= 100


def pause_metrics(figures: list[PauseFigures]) -> dict[str, list[float]]:
    """The server's garbage-collection and loop-lag figures of the runs, as row metrics."""
    return {
        "longest GC pause ms (upper bound of its bucket)": [f.longest_gc_ms[1] for f in figures],
        "GC pauses over 20 ms": [f.gc_over_20ms for f in figures],
        "event-loop lag p99 ms (bucket bound)": [f.loop_lag_p99_ms for f in figures],
    }


def grpc_handled(metrics_url: str, method: str) -> dict[str, float]:
    """``grpc_server_handled_total`` of ``/pkg.Service/Method`` by status code (go-grpc-prometheus
    names: the NameServer and etcd both export them)."""
    service, _, name = method.lstrip("/").rpartition("/")
    counts: dict[str, float] = {}
    for labels, value in scrape(metrics_url).get("grpc_server_handled_total", []):
        if labels.get("grpc_service") == service and labels.get("grpc_method") == name:
            counts[labels["grpc_code"]] = counts.get(labels["grpc_code"], 0.0) + value
    return counts


# ---------------------------------------------------------------------------- h2load, gRPC-aware


def grpc_frame(message: bytes | Message) -> bytes:
    """A gRPC length-prefixed message (uncompressed), as h2load sends it as the request body."""
    payload = message if isinstance(message, bytes) else message.SerializeToString()
    return struct.pack(">BI", 0, len(payload)) + payload


@dataclass(frozen=True)
class GrpcTarget:
    """A unary gRPC method of a server process, driven by h2load with one fixed request.

    ``check`` receives a response message (serialized) and raises when it is not the right answer;
    after every run a sample of calls is made with a real gRPC client and checked, and the
    server's own ``grpc_server_handled_total`` must show as many OK answers as h2load counted
    successes and no other code, so an error reply (HTTP 200 with a non-OK ``grpc-status``
    trailer) can never count as a fast success."""

    name: str
    address: str
    path: str
    request: bytes
    pid: int
    metrics_url: str
    check: Callable[[bytes], None]


@dataclass(frozen=True)
class LoadRun:
    """One load run: counts, requests/s, latency percentiles (ms), CPU of server and load generator."""

    requests: int
    grpc_ok: int
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    wall_seconds: float
    server_cpu_seconds: float
    loadgen_cpu_seconds: float
    loadgen: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def server_cpu_us_per_request(self) -> float:
        return self.server_cpu_seconds / max(1, self.grpc_ok) * 1e6

    @property
    def server_cores(self) -> float:
        """Cores the server kept busy on average."""
        return self.server_cpu_seconds / self.wall_seconds

    @property
    def loadgen_cores(self) -> float:
        return self.loadgen_cpu_seconds / self.wall_seconds

    def as_dict(self) -> dict[str, Any]:
        out = {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}
        out["server_cpu_us_per_request"] = round(self.server_cpu_us_per_request, 1)
        out["server_cores"] = round(self.server_cores, 2)
        out["loadgen_cores"] = round(self.loadgen_cores, 2)
        return out


def verify_sample(target: GrpcTarget, calls: int = 10) -> None:
    """Make ``calls`` calls of the target with a real gRPC client; raise BenchError unless every one
    is OK and passes the target's check."""
    with grpc.insecure_channel(target.address) as channel:
        method: Any = channel.unary_unary(target.path)
        for _ in range(calls):
            try:
                response = method(target.request, timeout=30)
            except grpc.RpcError as error:
                raise BenchError(f"{target.name} {target.path}: the load generator's request fails: {error}") from None
            target.check(response)


def run_threads(target: Callable[[int], None], count: int, timeout: float) -> None:
    """``target(i)`` for each i in ``range(count)``, each in a daemon thread of its own, all at once;
    returns once each ended or ``timeout`` seconds passed waiting for it."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def h2load(
    target: GrpcTarget,
    *,
    seconds: float,
    connections: int = 4,
    streams: int = 16,
    threads: int = 1,
    warm_up: float = 1.0,
) -> LoadRun:
    """Run h2load against ``target`` with ``connections`` x ``streams`` requests in flight for
    ``seconds`` after ``warm_up`` seconds; percentiles from its per-request log; server CPU from /proc
    and h2load's CPU from rusage, both over h2load's whole life (warm-up included), divided by the
    server's count of OK answers over the same span. Raises BenchError when any answer was not OK."""
    binary = shutil.which("h2load")
    if binary is None:
        raise BenchError("h2load not found: run scripts/install-bench-tools.sh (Debian nghttp2-client)")
    with tempfile.TemporaryDirectory(prefix="h2load-") as tmp:
        body = Path(tmp, "body")
        body.write_bytes(grpc_frame(target.request))
        log = Path(tmp, "log")
        args = [
            binary, f"http://{target.address}{target.path}", "-c", str(connections), "-m", str(streams),
            "-t", str(threads), "-D", str(max(1, round(seconds))), "--warm-up-time", f"{round(warm_up * 1000)}ms",
            "-d", str(body), "--log-file", str(log), "-H", "content-type: application/grpc", "-H", "te: trailers",
        ]  # fmt: skip
        handled_before = grpc_handled(target.metrics_url, target.path)
        cpu_before, gen_before, wall_before = cpu_seconds(target.pid), children_cpu_seconds(), time.perf_counter()
        completed = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60, check=False)
        wall = time.perf_counter() - wall_before
        server_cpu, gen_cpu = cpu_seconds(target.pid) - cpu_before, children_cpu_seconds() - gen_before
        handled_after = grpc_handled(target.metrics_url, target.path)
        if completed.returncode != 0:
            raise BenchError(f"h2load failed ({completed.returncode}): {completed.stderr or completed.stdout}")
        out = completed.stdout
        latencies = sorted(int(line.split("\t")[2]) / 1000 for line in log.read_text().splitlines() if line)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    if done is None or rps is None:
        raise BenchError(f"cannot read h2load's output:\n{out}")
    delta = {code: handled_after.get(code, 0.0) - handled_before.get(code, 0.0) for code in handled_after}
    errors = {code: n for code, n in delta.items() if code != "OK" and n}
    # h2load resets the streams still in flight when its time is up; servers count those as
    # cancelled (etcd: Unknown). At most one per stream in flight, and never counted by h2load.
    cut_off = sum(n for code, n in errors.items() if code.upper() in CUT_OFF_CODES)
    succeeded, failed = int(done.group(2)), int(done.group(3))
    if failed or cut_off > connections * streams or set(errors) - {c for c in errors if c.upper() in CUT_OFF_CODES}:
        raise BenchError(f"{target.name}: error answers during the run: {errors}, h2load failed {failed}")
    if delta.get("OK", 0) < succeeded:
        raise BenchError(
            f"{target.name}: h2load counted {succeeded} successes, the server only {delta.get('OK', 0):.0f} OK"
        )
    verify_sample(target)
    return LoadRun(
        requests=int(done.group(1)),
        grpc_ok=int(delta.get("OK", 0)),
        rps=float(rps.group(1)),
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        max_ms=latencies[-1] if latencies else 0.0,
        wall_seconds=wall,
        server_cpu_seconds=server_cpu,
        loadgen_cpu_seconds=gen_cpu,
        loadgen=f"h2load -t {threads} -c {connections} -m {streams}",
        extra={"loadgen_threads": threads, "cut_off_at_end": cut_off},
    )


def start_workers(commands: Sequence[Sequence[str]], what: str) -> list[subprocess.Popen[str]]:
    """Start one load-generator process per command (``python -m bench.…``) and wait until each has
    printed ``ready`` (its connections are open); raises BenchError naming ``what`` and kills them all
    when one does not start. The workers read their start signal from stdin."""
    workers = [
        subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        for command in commands
    ]
    for worker in workers:
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            for other in workers:
                other.kill()
            raise BenchError(f"a {what} load worker did not start")
    return workers


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values (nearest rank)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return float(sorted_values[index])


def namesrv_route_check(topic: str, broker_names: int) -> Callable[[bytes], None]:
    """A check that a PickupTopicRoute answer is ``topic``'s route over ``broker_names`` broker names."""

    def check(raw: bytes) -> None:
        try:
            route = ns_pb2.PickupTopicRouteResponse.FromString(raw).route
        except DecodeError as exc:
            raise BenchError(f"answer for {topic} is no PickupTopicRouteResponse: {exc}") from None
        if len(route.queue_datas) != broker_names or len(route.broker_datas) != broker_names:
            raise BenchError(f"route of {topic} has {len(route.queue_datas)} QueueData, expected {broker_names}")

    return check


def namesrv_lookup_target(server: Server, topic: str, broker_names: int) -> GrpcTarget:
    return GrpcTarget(
        "namesrv PickupTopicRoute", server.address, PICKUP_TOPIC_ROUTE,
        ns_pb2.PickupTopicRouteRequest(topic=topic).SerializeToString(), server.pid, server.metrics_url,
        namesrv_route_check(topic, broker_names),
    )  # fmt: skip


def namesrv_health_target(server: Server) -> GrpcTarget:
    def check(raw: bytes) -> None:
        if health_pb2.HealthCheckResponse.FromString(raw).status != health_pb2.HealthCheckResponse.SERVING:
            raise BenchError("health check: not SERVING")

    return GrpcTarget(
        "namesrv health check", server.address, HEALTH_CHECK, health_pb2.HealthCheckRequest().SerializeToString(),
        server.pid, server.metrics_url, check,
    )  # fmt: skip


def namesrv_core_ceiling() -> float:
    """The cores namesrv's processes can keep busy at most: its serving processes (one interpreter,
    one GIL each; ``serverWorkerProcesses``' default), at most the machine's cores."""
    return float(min(default_worker_processes(), os.cpu_count() or 1))


def bottleneck(server_cores: float, server_ceiling: float, loadgen_cores: float, loadgen_ceiling: float) -> str:
    """Which side ran closer to its own ceiling of cores (namesrv: :func:`namesrv_core_ceiling`;
    etcd and the Java NameServer: the machine's cores; h2load: its threads; N client processes: N,
    at most the cores)."""
    server_share, loadgen_share = server_cores / server_ceiling, loadgen_cores / loadgen_ceiling
    side = "server" if server_share >= loadgen_share else "load generator"
    return (
        f"{side} (server {server_share:.0%} of {server_ceiling:g} core(s), "
        f"load generator {loadgen_share:.0%} of {loadgen_ceiling:g})"
    )


# ---------------------------------------------------------------------------- requests


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
    """Cores, CPU model, Python and grpcio versions, OS, tools: what the numbers were measured on."""
    cpu = "unknown"
    with suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )

    def version(*command: str) -> str:
        if shutil.which(command[0]) is None:
            return "missing"
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        return (result.stdout or result.stderr).strip().splitlines()[0]

    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "os": platform.platform(),
        "h2load": version("h2load", "--version"),
        "etcd": version("etcd", "--version"),
    }
