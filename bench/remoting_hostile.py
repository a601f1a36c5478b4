"""Clients that try to starve the others (issue 20), on the remoting door, and a well-behaved client
that looks a topic up on both doors meanwhile.

Each attack is a function of its size: ``tests/test_bounds.py`` runs them scaled down, scenario 12
of ``make bench`` (:func:`s12_hostile_clients`) at the issue's sizes::

    .venv/bin/python -m bench.run --only 12          # full size; results in docs/benchmarks.md

Each attack runs in a process of its own (spawned before the timing starts), the well-behaved
client in the bench process: the attacker's Python loops must not hold the GIL the client's
lookups are timed under. The connection flood needs ``ulimit -n`` raised: :func:`raise_fd_limit`
raises this process's soft limit to the hard one, and the server and attacker it starts inherit
it. Each run reports the well-behaved client's lookup p99 and max on both doors, its failed
lookups, the server's peak RSS growth (``VmHWM``) and log growth, and what the attacker saw.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import os
import resource
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import psutil

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode

if TYPE_CHECKING:
    from bench.harness import Profile, Result

MIB = 1024 * 1024
PROBE_TOPIC = "ProbeTopic"
TOPICS = 1_000
"""Topics registered before an attack (the issue's measurements had 1,000)."""


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard one (children inherit it); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connect(address: str, timeout: float = 10.0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def frame(code: int, opaque: int, ext: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    return encode_command(RemotingCommand(code, opaque, 0, None, dict(ext or {}), body, "JAVA", 479))


def call(sock: socket.socket, command: bytes, timeout: float = 10.0) -> RemotingCommand:
    """Send one frame and read one answer (the connection has nothing else in flight)."""
    sock.settimeout(timeout)
    sock.sendall(command)
    decoder = FrameDecoder()
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("closed by the server")
        answers = decoder.feed(data)
        if answers:
            return answers[0]


def register_topics(remoting: str, count: int = TOPICS) -> None:
    """Register broker ``broker-probe`` with PROBE_TOPIC and ``count`` other topics over remoting
    (the connection stays open for the process: closing it would unregister the broker)."""
    topics = {PROBE_TOPIC: None} | {f"Topic-{i:05d}": None for i in range(count)}
    table = {
        name: {"topicName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "order": False} for name in topics
    }
    body = json.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1},
                "topicConfigTable": table,
            },
        }
    ).encode()
    ext = {
        "brokerName": "broker-probe",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
        "haServerAddr": "127.0.0.1:10912",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    sock = connect(remoting)
    answer = call(sock, frame(RequestCode.REGISTER_BROKER, 1, ext, body), timeout=60)
    if answer.code != 0:
        raise RuntimeError(f"registration refused: {answer.code} {answer.remark}")
    _KEEP.append(sock)


_KEEP: list[socket.socket] = []


# --------------------------------------------------------------------------- the well-behaved client


@dataclass
class DoorStats:
    count: int = 0
    failed: int = 0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    """Why lookups failed: exception class or gRPC status -> count."""


@dataclass
class ProbeResult:
    remoting: DoorStats = field(default_factory=DoorStats)
    grpc: DoorStats = field(default_factory=DoorStats)


def _stats(latencies: list[float], errors: dict[str, int]) -> DoorStats:
    failed = sum(errors.values())
    if not latencies:
        return DoorStats(0, failed, errors=errors)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return DoorStats(len(ordered), failed, round(p99, 2), round(ordered[-1], 2), errors)


@contextlib.contextmanager
def probing(
    remoting: str, grpc_address: str, interval: float = 0.05, timeout: float = 10.0, min_lookups: int = 5
) -> Iterator[ProbeResult]:
    """Look PROBE_TOPIC up every ``interval`` s on both doors (one thread each) for the ``with``
    block; a lookup that fails or takes over ``timeout`` s counts as failed (and is timed as taken)."""
    result = ProbeResult()
    stop = threading.Event()
    made = [0, 0]
    """Lookups made so far: remoting, gRPC."""

    def remoting_loop() -> None:
        latencies: list[float] = []
        errors: dict[str, int] = {}
        sock: socket.socket | None = None
        opaque = 0
        while not stop.is_set():
            started = time.perf_counter()
            try:
                if sock is None:
                    sock = connect(remoting, timeout)
                opaque += 1
                answer = call(sock, frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque, {"topic": PROBE_TOPIC}), timeout)
                if answer.code != 0:
                    errors[f"response code {answer.code}"] = errors.get(f"response code {answer.code}", 0) + 1
            except OSError as exc:
                reason = f"{type(exc).__name__} {exc.errno or ''}".strip()
                errors[reason] = errors.get(reason, 0) + 1
                if sock is not None:
                    sock.close()
                sock = None
            latencies.append((time.perf_counter() - started) * 1000)
            made[0] += 1
            stop.wait(interval)
        if sock is not None:
            sock.close()
        result.remoting = _stats(latencies, errors)

    def grpc_loop() -> None:
        latencies: list[float] = []
        errors: dict[str, int] = {}
        with grpc.insecure_channel(grpc_address) as channel:
            stub = ns_grpc.NameServerServiceStub(channel)
            request = ns_pb2.PickupTopicRouteRequest(topic=PROBE_TOPIC)
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    stub.PickupTopicRoute(request, timeout=timeout)
                except grpc.RpcError as error:
                    reason = f"{error.code().name}: {(error.details() or '')[:80]}"
                    errors[reason] = errors.get(reason, 0) + 1
                latencies.append((time.perf_counter() - started) * 1000)
                made[1] += 1
                stop.wait(interval)
        result.grpc = _stats(latencies, errors)

    threads = [threading.Thread(target=remoting_loop, daemon=True), threading.Thread(target=grpc_loop, daemon=True)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    while min(made) < 1 and time.monotonic() < deadline:  # connected and answered before the attack
        time.sleep(0.01)
    try:
        yield result
    finally:
        # At least ``min_lookups`` per door (a short attack still sees a few), within ``timeout``.
        deadline = time.monotonic() + timeout
        while min(made) < min_lookups and time.monotonic() < deadline and all(t.is_alive() for t in threads):
            time.sleep(interval)
        stop.set()
        for thread in threads:
            thread.join(timeout + 5)


# --------------------------------------------------------------------------- attacks


def pipeline_unread(
    remoting: str, code: int, connections: int, bytes_each: int, ext: dict[str, str] | None = None
) -> list[socket.socket]:
    """``connections`` connections each sending ``bytes_each`` bytes of pipelined ``code`` requests
    and never reading an answer. Returns the sockets (still open)."""
    one = frame(code, 7, ext)
    payload = one * max(1, bytes_each // len(one))
    socks = []
    for _ in range(connections):
        sock = connect(remoting)
        sock.setblocking(False)
        socks.append(sock)
    sent = [0] * connections
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(s < len(payload) for s in sent):
        progress = False
        for i, sock in enumerate(socks):
            if sent[i] >= len(payload):
                continue
            try:
                n = sock.send(payload[sent[i] : sent[i] + 256 * 1024])
            except BlockingIOError:
                continue
            except OSError:
                sent[i] = len(payload)
                continue
            sent[i] += n
            progress = progress or n > 0
        if not progress:
            time.sleep(0.01)
    return socks


def idle_flood(remoting: str, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing (those the server closes are closed here too)."""
    socks = []
    for _ in range(count):
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(2)
            host, port = remoting.rsplit(":", 1)
            sock.connect((host, int(port)))
            socks.append(sock)
        except OSError:
            break
    return socks


def open_count(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server has not closed (a closed one reads EOF or a reset)."""
    alive = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                continue
        except BlockingIOError:
            alive += 1
            continue
        except OSError:
            continue
    return alive


def slow_frames(remoting: str, connections: int, declared: int, held: int) -> list[socket.socket]:
    """``connections`` connections each announcing a frame of ``declared`` bytes and sending
    ``held`` bytes of it (then nothing: :func:`trickle` sends one more byte each)."""
    socks = []
    header = b'{"code":103,"flag":0,"language":"JAVA","opaque":1,"version":479}'
    start = struct.pack(">ii", declared - 4, len(header)) + header
    for _ in range(connections):
        sock = connect(remoting)
        with contextlib.suppress(OSError):
            sock.sendall(start + bytes(held - len(start)))
        socks.append(sock)
    return socks


def trickle(socks: list[socket.socket]) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.send(b"\0")


def unknown_codes(remoting: str, frames: int) -> int:
    """``frames`` requests of an unknown code, pipelined on one connection, answers read; returns
    the answers received."""
    sock = connect(remoting, 30)
    one = frame(9999, 1)
    received = 0
    decoder = FrameDecoder()

    def read() -> None:
        nonlocal received
        with contextlib.suppress(OSError):
            while received < frames:
                data = sock.recv(1 << 20)
                if not data:
                    return
                received += len(decoder.feed(data))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    batch = one * 1000
    for _ in range(frames // 1000):
        sock.sendall(batch)
    reader.join(60)
    sock.close()
    return received


def deflate_bomb(compressed_mib: int = 1) -> bytes:
    compressor = zlib.compressobj(9)
    zeros = bytes(16 * MIB)
    return b"".join(compressor.compress(zeros) for _ in range(64 * compressed_mib)) + compressor.flush()


def register_bombs(remoting: str, count: int, bomb: bytes) -> list[int]:
    """``count`` pipelined compressed REGISTER_BROKER requests whose body is ``bomb``; returns the
    response codes (in the order they arrive)."""
    ext = {
        "brokerName": "broker-evil",
        "brokerAddr": "127.0.0.1:20911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
        "compressed": "true",
        "bodyCrc32": "0",
    }
    sock = connect(remoting, 120)
    codes: list[int] = []
    decoder = FrameDecoder()

    def read() -> None:
        with contextlib.suppress(OSError):
            while len(codes) < count:
                data = sock.recv(1 << 20)
                if not data:
                    return
                codes.extend(a.code for a in decoder.feed(data))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for i in range(count):
        sock.sendall(frame(RequestCode.REGISTER_BROKER, i + 1, ext, bomb))
    reader.join(300)
    sock.close()
    return codes


def wide_header(size: int) -> bytes:
    """A frame whose JSON header is ``[[],[],...]`` of about ``size`` bytes."""
    header = b"[" + b"[]," * (size // 3) + b"[]]"
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def huge_counter_query(opaque: int = 1) -> bytes:
    """QUERY_DATA_VERSION with a DataVersion counter of 10^5000."""
    body = b'{"counter":1' + b"0" * 5000 + b',"stateVersion":0,"timestamp":1}'
    ext = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": "0"}
    return frame(RequestCode.QUERY_DATA_VERSION, opaque, ext, body)


# --------------------------------------------------------------------------- the bench


def _peak_rss(pid: int) -> int:
    """The peak resident set size (``VmHWM``) of ``pid`` and every process under it, summed: for
    ``namesrv``, the supervisor, the route-table process and every serving process (each one's own
    peak; their sum bounds the peak of the whole)."""
    total = 0
    for one in _tree_pids(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
    return total


# Each attack as run by scenario 12: a module-level function of the remoting address (and its
# sizes) returning what the attacker saw, so that it can run in a process of its own (the
# well-behaved client's lookups are timed in the bench process, whose GIL the attacker must not hold).


def attack_pipelined(
    remoting: str, code: int, connections: int, bytes_each: int, hold: float, ext: dict[str, str] | None = None
) -> str:
    socks = pipeline_unread(remoting, code, connections, bytes_each, ext)
    time.sleep(hold)
    for sock in socks:
        sock.close()
    return f"{connections} connections sent {bytes_each * connections // 1024:,} KiB"


def attack_flood(remoting: str, count: int, hold: float) -> str:
    socks = idle_flood(remoting, count)
    time.sleep(hold)
    alive = open_count(socks)
    for sock in socks:
        sock.close()
    return f"{len(socks):,} connected, {alive:,} still open after the flood"


def attack_slow(remoting: str, count: int, held: int, seconds: int) -> str:
    socks = slow_frames(remoting, count, 16 * MIB, held)
    for _ in range(seconds):
        time.sleep(1)
        trickle(socks)
    alive = open_count(socks)
    for sock in socks:
        sock.close()
    return f"{alive} of {count} still open"


def attack_unknown(remoting: str, frames: int) -> str:
    return f"{unknown_codes(remoting, frames):,} of {frames:,} answered"


def attack_bombs(remoting: str, count: int, bomb: bytes) -> str:
    codes = register_bombs(remoting, count, bomb)
    return f"{len(codes)} of {count} answered, response codes {sorted(set(codes))}"


def attack_header(remoting: str, size: int) -> str:
    closed = 0
    for _ in range(5):
        sock = connect(remoting, 30)
        with contextlib.suppress(OSError):
            sock.sendall(wide_header(size))
            if sock.recv(1) == b"":
                closed += 1
        sock.close()
    return f"{closed} of 5 connections closed"


def attack_counter(remoting: str) -> str:
    sock = connect(remoting)
    answer = call(sock, huge_counter_query())
    sock.close()
    return f"answer code {answer.code}: {(answer.remark or '')[:50]}"


def attacker_ready() -> int:
    """Run first in the attacker's process: this module is imported there before timing starts."""
    return os.getpid()


def sized_attacks(p: Profile) -> dict[str, tuple[str, str, Callable[[str], str]]]:
    """row id -> (name, what, run(remoting address) -> what the attacker saw), at the issue's sizes
    for the full profile (what this box can make), smaller for quick and tiny. Each ``run`` is
    picklable (a partial of a module-level function), to run in the attacker's own process."""
    connections = p.pick(30, 10, 2)
    per_connection = p.pick(MIB, 256 * 1024, 64 * 1024)
    flood_size = p.pick(20_000, 2_000, 100)
    slow_count, slow_held = p.pick((100, 14 * MIB), (20, 4 * MIB), (3, MIB))
    unknown = p.pick(1_000_000, 100_000, 5_000)
    bomb_count = p.pick(200, 20, 3)
    header_size = p.pick(16 * MIB - 16, 4 * MIB, MIB)
    hold = p.pick(5, 2, 0.5)

    def pipelined(code: int, ext: dict[str, str] | None = None) -> Callable[[str], str]:
        return functools.partial(
            attack_pipelined, code=code, connections=connections, bytes_each=per_connection, hold=hold, ext=ext
        )

    mib = per_connection * connections / MIB
    return {
        "12a": (
            "pipelined-206",
            f"{connections} connections x {mib / connections:g} MiB of pipelined GET_ALL_TOPIC_LIST (206), "
            "answers never read",
            pipelined(206),
        ),
        "12b": ("pipelined-319", "the same with GET_NAMESRV_CONFIG (319)", pipelined(319)),
        "12c": ("pipelined-105", "the same with lookups (105)", pipelined(105, {"topic": PROBE_TOPIC})),
        "12d": (
            "idle-flood",
            f"{flood_size:,} idle remoting connections (ulimit -n raised to the hard limit)",
            functools.partial(attack_flood, count=flood_size, hold=p.pick(3, 1, 0.5)),
        ),
        "12e": (
            "slow-frames",
            f"{slow_count} connections each holding {slow_held // MIB} MiB of a declared 16 MiB frame, "
            "one more byte a second",
            functools.partial(attack_slow, count=slow_count, held=slow_held, seconds=p.pick(5, 3, 1)),
        ),
        "12f": (
            "unknown-codes",
            f"{unknown:,} pipelined frames of an unknown request code",
            functools.partial(attack_unknown, frames=unknown),
        ),
        "12g": (
            "register-bombs",
            f"{bomb_count} pipelined compressed REGISTER_BROKER bodies of 1 MiB inflating to 1 GiB",
            functools.partial(attack_bombs, count=bomb_count, bomb=deflate_bomb(1)),
        ),
        "12h": (
            "wide-header",
            f"a {header_size / MIB:.0f} MiB JSON header [[],[],...], 5 connections",
            functools.partial(attack_header, size=header_size),
        ),
        "12i": ("huge-counter", "QUERY_DATA_VERSION with a DataVersion counter of 10^5000", attack_counter),
    }


def s12_hostile_clients(p: Profile) -> Result:
    """Each attack of issue 20 against a fresh server with 1,000 topics, while a well-behaved client
    looks a topic up every 50 ms on both doors."""
    from bench.harness import namesrv, row

    raise_fd_limit()
    attacks = sized_attacks(p)
    rows: list[Result] = []
    raw: dict[str, list[dict[str, object]]] = {}
    for row_id, (name, what, run) in attacks.items():
        metrics: dict[str, list[float]] = {
            "remoting p99 ms": [], "remoting max ms": [], "gRPC p99 ms": [], "gRPC max ms": [],
            "failed lookups": [], "peak RSS growth MiB": [], "log growth KiB": [],
        }  # fmt: skip
        base: dict[str, list[float]] = {"remoting p99 ms": [], "gRPC p99 ms": []}
        alive = True
        notes: list[str] = []
        raw[row_id] = []
        for _ in range(p.repeats):
            with namesrv() as server:
                remoting = server.remoting_address
                register_topics(remoting)
                with probing(remoting, server.address) as quiet:
                    time.sleep(p.pick(2, 1, 0.3))
                log_before = server.log_size()
                before = _peak_rss(server.pid)
                with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as attacker:
                    attacker.submit(attacker_ready).result()
                    with probing(remoting, server.address) as probe:
                        started = time.monotonic()
                        note = attacker.submit(run, remoting).result()
                        seconds = time.monotonic() - started
                alive = alive and server.process.poll() is None
                growth = (_peak_rss(server.pid) - before) / MIB if alive else 0.0
                for sock in _KEEP:
                    sock.close()
                _KEEP.clear()
                log_growth = (server.log_size() - log_before) / 1024
            metrics["remoting p99 ms"].append(probe.remoting.p99_ms)
            metrics["remoting max ms"].append(probe.remoting.max_ms)
            metrics["gRPC p99 ms"].append(probe.grpc.p99_ms)
            metrics["gRPC max ms"].append(probe.grpc.max_ms)
            metrics["failed lookups"].append(probe.remoting.failed + probe.grpc.failed)
            metrics["peak RSS growth MiB"].append(growth)
            metrics["log growth KiB"].append(log_growth)
            base["remoting p99 ms"].append(quiet.remoting.p99_ms)
            base["gRPC p99 ms"].append(quiet.grpc.p99_ms)
            notes.append(f"{note} ({seconds:.1f} s)")
            raw[row_id].append({"note": note, "seconds": seconds, "probe": asdict(probe), "quiet": asdict(quiet)})
        met = (
            alive
            and max(metrics["remoting p99 ms"] + metrics["gRPC p99 ms"]) <= 50
            and max(metrics["remoting max ms"] + metrics["gRPC max ms"]) <= 250
            and max(metrics["failed lookups"]) == 0
            and max(metrics["peak RSS growth MiB"]) <= 256
            and max(metrics["log growth KiB"]) <= 1024
        )
        rows.append(
            row(
                row_id,
                f"{name}: {what}; meanwhile one client looks a topic up every 50 ms on each door",
                f"1,000 topics registered; a fresh server per run; {len(raw[row_id])} runs",
                metrics,
                baseline="the same client's lookups with no attack (same server, just before)",
                baseline_metrics=base,
                target="every run: lookup p99 <= 50 ms and max <= 250 ms on both doors, none failed, RSS +<= 256 MiB, "
                "log +<= 1 MiB, server alive",
                met=met,
                note=f"{row_id} attacker saw: " + "; ".join(notes),
            )
        )
    return {
        "title": "clients that try to starve the others (issue 20), both doors",
        "rows": rows,
        "notes": [BEFORE],
        "raw": raw,
    }


BEFORE = """What these attacks did before the bounds of issue 20 (same kind of box, quiet, 1,000 topics, a \
client looking a topic up every 50 ms on each door; figures from the issue):

| attack | before |
|---|---|
| 12a: 30 x 1 MiB pipelined GET_ALL_TOPIC_LIST, never read | RSS 2.5 GB; no lookup answered on either door for 50 s |
| 12b, 12c: the same with GET_NAMESRV_CONFIG, or with lookups | lookups waited 1.6-3.4 s |
| 12d: ~20,000 idle connections | fds exhausted; gRPC lookups timed out; 220 MB of "accept() out of system resource" |
| 12e: 100 connections x 14 MiB of a 16 MiB frame, a byte at a time | RSS +1.4 GB, kept forever |
| 12f: ~1M frames of an unknown request code | 107 MB of WARNING lines |
| 12g: 200 pipelined compressed REGISTER_BROKER bombs | 44 s of work queued, RSS +750 MB kept, lookups <= 335 ms |
| 12h: a 16 MiB JSON header `[[],[],...]` | the event loop blocked 1.5 s per frame |
| 12i: a DataVersion counter of 10^5000 | a traceback logged per request |"""


def _tree_pids(pid: int) -> list[int]:
    """``pid`` and every live process under it (``namesrv``'s route-table and serving processes)."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [pid]
