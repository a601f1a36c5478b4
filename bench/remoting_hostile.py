"""Clients that try to starve the others (issue 20), on the remoting door, and a well-behaved client
that looks a topic up on both doors meanwhile.

Each attack is a function of its size, so ``tests/test_bounds.py`` runs it scaled down and
``python -m bench.remoting_hostile`` at full size (``make bench`` runs it; the connection flood needs
``ulimit -n`` raised, which this module does for itself and the server up to the hard limit)::

    PYTHONPATH=$PWD/src .venv/bin/python -m bench.remoting_hostile [--only NAME,...] [--json FILE]

For each attack it prints the well-behaved client's lookup p99 and max on both doors, failed
lookups, the server's peak RSS growth (``VmHWM``), its log growth, and whether it kept running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode

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


@dataclass
class ProbeResult:
    remoting: DoorStats = field(default_factory=DoorStats)
    grpc: DoorStats = field(default_factory=DoorStats)


def _stats(latencies: list[float], failed: int) -> DoorStats:
    if not latencies:
        return DoorStats(0, failed)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return DoorStats(len(ordered), failed, round(p99, 2), round(ordered[-1], 2))


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
        failed = 0
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
                    failed += 1
            except OSError:
                failed += 1
                if sock is not None:
                    sock.close()
                sock = None
            latencies.append((time.perf_counter() - started) * 1000)
            made[0] += 1
            stop.wait(interval)
        if sock is not None:
            sock.close()
        result.remoting = _stats(latencies, failed)

    def grpc_loop() -> None:
        latencies: list[float] = []
        failed = 0
        with grpc.insecure_channel(grpc_address) as channel:
            stub = ns_grpc.NameServerServiceStub(channel)
            request = ns_pb2.PickupTopicRouteRequest(topic=PROBE_TOPIC)
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    stub.PickupTopicRoute(request, timeout=timeout)
                except grpc.RpcError:
                    failed += 1
                latencies.append((time.perf_counter() - started) * 1000)
                made[1] += 1
                stop.wait(interval)
        result.grpc = _stats(latencies, failed)

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
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class Row:
    name: str
    what: str
    seconds: float
    probe: ProbeResult
    rss_growth_mib: float
    log_growth_kib: float
    alive: bool
    note: str = ""

    def line(self) -> str:
        r, g = self.probe.remoting, self.probe.grpc
        return (
            f"| {self.name} | {self.what} | {self.seconds:.1f} | {r.p99_ms:.1f} / {r.max_ms:.0f} ({r.failed} failed) | "
            f"{g.p99_ms:.1f} / {g.max_ms:.0f} ({g.failed} failed) | {self.rss_growth_mib:.0f} | "
            f"{self.log_growth_kib:.0f} | {'yes' if self.alive else 'NO'} | {self.note} |"
        )


def full_size_attacks() -> dict[str, tuple[str, Callable[[str], str]]]:
    """name -> (what, run(remoting address) -> note), at the issue's sizes (what this box can make)."""

    def pipelined(code: int, ext: dict[str, str] | None = None) -> Callable[[str], str]:
        def run(remoting: str) -> str:
            socks = pipeline_unread(remoting, code, 30, MIB, ext)
            time.sleep(5)
            for sock in socks:
                sock.close()
            return ""

        return run

    def flood(remoting: str) -> str:
        socks = idle_flood(remoting, 20_000)
        time.sleep(3)
        alive = open_count(socks)
        for sock in socks:
            sock.close()
        return f"{len(socks)} connected, {alive} still open"

    def slow(remoting: str) -> str:
        socks = slow_frames(remoting, 100, 16 * MIB, 14 * MIB)
        for _ in range(5):
            time.sleep(1)
            trickle(socks)
        alive = open_count(socks)
        for sock in socks:
            sock.close()
        return f"{alive} of 100 still open after 5 s"

    def unknown(remoting: str) -> str:
        return f"{unknown_codes(remoting, 1_000_000)} answers"

    def bombs(remoting: str) -> str:
        codes = register_bombs(remoting, 200, deflate_bomb(1))
        return f"{len(codes)} answers, codes {sorted(set(codes))}"

    def header(remoting: str) -> str:
        closed = 0
        for _ in range(5):
            sock = connect(remoting, 30)
            sock.sendall(wide_header(16 * MIB - 16))
            with contextlib.suppress(OSError):
                if sock.recv(1) == b"":
                    closed += 1
            sock.close()
        return f"{closed} of 5 closed"

    def counter(remoting: str) -> str:
        sock = connect(remoting)
        answer = call(sock, huge_counter_query())
        sock.close()
        return f"answer {answer.code}: {(answer.remark or '')[:60]}"

    return {
        "pipelined-206": ("30 connections x 1 MiB of pipelined GET_ALL_TOPIC_LIST, answers never read", pipelined(206)),
        "pipelined-319": ("the same with GET_NAMESRV_CONFIG", pipelined(319)),
        "pipelined-105": ("the same with lookups", pipelined(105, {"topic": PROBE_TOPIC})),
        "idle-flood": ("20,000 idle connections", flood),
        "slow-frames": ("100 connections x 14 MiB of a 16 MiB frame, one byte a second", slow),
        "unknown-codes": ("1,000,000 frames of an unknown request code", unknown),
        "register-bombs": ("200 pipelined compressed REGISTER_BROKER bombs (1 MiB -> 1 GiB)", bombs),
        "wide-header": ("16 MiB JSON header [[],[],...], 5 times", header),
        "huge-counter": ("DataVersion counter 10^5000", counter),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated attack names")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    from bench.harness import namesrv

    fds = raise_fd_limit()
    attacks = full_size_attacks()
    names = args.only.split(",") if args.only else list(attacks)
    print(f"RLIMIT_NOFILE {fds}")
    print(
        "| attack | what | seconds | remoting lookup p99 / max ms | gRPC lookup p99 / max ms | "
        "peak RSS growth MiB | log growth KiB | alive | attacker saw |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in names:
        what, run = attacks[name]
        with namesrv() as server:
            remoting = f"127.0.0.1:{server.remoting_port}"
            register_topics(remoting)
            log_before = server.log_size()
            before = _peak_rss(server.process.pid)
            with probing(remoting, server.address) as probe:
                time.sleep(1)
                started = time.monotonic()
                note = run(remoting)
                seconds = time.monotonic() - started
                time.sleep(1)
            alive = server.process.poll() is None
            row = Row(
                name,
                what,
                seconds,
                probe,
                (_peak_rss(server.process.pid) - before) / MIB if alive else -1,
                (server.log_size() - log_before) / 1024,
                alive,
                note,
            )
            for sock in _KEEP:
                sock.close()
            _KEEP.clear()
        rows.append(row)
        print(row.line(), flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
