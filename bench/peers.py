"""Route lookups side by side with a peer, in one run on one machine (scenarios 10 and 11):

- 10: requests per second and server CPU per request of etcd's ``KV/Range`` (one key, driven by
  h2load), our gRPC ``PickupTopicRoute`` (the same h2load settings) and our remoting
  GET_ROUTEINFO_BY_TOPIC (pipelined frames from several worker processes, :mod:`bench.remoting_load`);
  each run says whether the server or the load generator was the bottleneck.
- 11: remoting lookup latency while a 100,000-topic broker sends REGISTER_BROKER (compressed body,
  as a Java broker with ``compressedRegister=true``) every second over remoting.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from bench.etcd import etcd
from bench.harness import (
    LOOKUP_TAIL_TARGET,
    BenchError,
    LoadRun,
    PauseFigures,
    Pauses,
    Profile,
    Result,
    bottleneck,
    h2load,
    median,
    namesrv,
    namesrv_core_ceiling,
    namesrv_lookup_target,
    pause_metrics,
    register_request,
    row,
    size_text,
    tail_met,
    topic_configs,
)
from bench.remoting_load import remoting_load
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.client.remoting import RemotingClient
from namesrv_grpc.core.model import PERM_READ, DataVersion, TopicConfig
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire.bodies import encode_register_broker_body

CORES = os.cpu_count() or 1


def _runs(runs: list[LoadRun], attr: str) -> list[float]:
    return [float(getattr(r, attr)) for r in runs]


def _verdicts(runs: list[LoadRun], server_ceiling: float, loadgen_ceiling: float) -> str:
    return "; ".join(bottleneck(r.server_cores, server_ceiling, r.loadgen_cores, loadgen_ceiling) for r in runs)


def s10_lookup_peers(p: Profile) -> Result:
    """etcd Range vs gRPC PickupTopicRoute vs remoting GET_ROUTEINFO_BY_TOPIC, alternating runs."""
    seconds = p.pick(5, 1, 1)
    processes, connections, depth = min(2, CORES), 2, 64
    h2 = {"connections": 4, "streams": 16, "threads": 1}
    with namesrv() as server, server.channel() as channel, etcd() as kv:
        stub = ns_grpc.NameServerServiceStub(channel)
        topics = topic_configs(["TopicTest"], 4)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10911", topics), timeout=10)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10921", topics, broker_id=1), timeout=10)
        # etcd stores the very bytes of our gRPC answer under one key: both serve the same payload.
        value = stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=10).SerializeToString()
        key = b"/routes/TopicTest"
        kv.put(key, value)
        targets = {
            "etcd_linearizable": kv.range_target(key, value),
            "etcd_serializable": kv.range_target(key, value, serializable=True),
            "grpc": namesrv_lookup_target(server, "TopicTest", 1),
        }
        runs: dict[str, list[LoadRun]] = {name: [] for name in [*targets, "remoting"]}
        for _ in range(p.repeats):  # alternating, so drift of a shared machine hits all alike
            for name, target in targets.items():
                runs[name].append(h2load(target, seconds=seconds, warm_up=p.warm_up, **h2))
            runs["remoting"].append(
                remoting_load(
                    "blast",
                    server.remoting_address,
                    ["TopicTest"],
                    server_pid=server.pid,
                    metrics_url=server.metrics_url,
                    seconds=seconds,
                    processes=processes,
                    connections=connections,
                    depth=depth,
                )
            )
    h2load_what = (
        f"h2load {h2['connections']} connections x {h2['streams']} streams, {h2['threads']} thread, "
        f"{seconds} s per run after {p.warm_up:g} s warm-up"
    )
    blast = (
        f"{processes} worker processes x {connections} connections x {depth} pipelined requests, {seconds} s per run"
    )
    etcd_base = {
        "req/s (linearizable)": _runs(runs["etcd_linearizable"], "rps"),
        "req/s (serializable)": _runs(runs["etcd_serializable"], "rps"),
    }
    best_etcd = max(median(etcd_base["req/s (linearizable)"]), median(etcd_base["req/s (serializable)"]))
    peer = f"etcd KV/Range of one key holding the same {len(value)} route bytes, same run, {h2load_what}"

    def metrics(name: str) -> dict[str, list[float]]:
        r = runs[name]
        return {
            "req/s": _runs(r, "rps"),
            "server CPU us/request": [x.server_cpu_us_per_request for x in r],
            "server cores busy": [x.server_cores for x in r],
            "load generator cores busy": [x.loadgen_cores for x in r],
        }

    def etcd_row(row_id: str, name: str, kind: str) -> Result:
        return row(
            row_id, f"etcd {kind} KV/Range of one key ({len(value)}-byte value: the route below), {h2load_what}",
            f"{median(_runs(runs[name], 'requests')):,.0f} requests per run (median)", metrics(name),
            baseline="the peer itself (absolute)", target="", met=None,
            note=f"{row_id} bottleneck per run: {_verdicts(runs[name], CORES, h2['threads'])}",
        )  # fmt: skip

    rows = [
        etcd_row("10a", "etcd_linearizable", "linearizable (etcd's default read)"),
        etcd_row("10b", "etcd_serializable", "serializable (local read, like a NameServer's)"),
        row(
            "10c", f"our gRPC PickupTopicRoute of one topic on one broker name (master + slave), {h2load_what}",
            f"{median(_runs(runs['grpc'], 'requests')):,.0f} requests per run (median)", metrics("grpc"),
            baseline=peer, baseline_metrics=etcd_base, target="", met=None,
            note=f"10c bottleneck per run: {_verdicts(runs['grpc'], namesrv_core_ceiling(), h2['threads'])}",
        ),
        row(
            "10d", f"our remoting GET_ROUTEINFO_BY_TOPIC of the same topic (JSON header, as the Java client), {blast}",
            f"{median(_runs(runs['remoting'], 'requests')):,.0f} requests per run (median)", metrics("remoting"),
            baseline=peer, baseline_metrics=etcd_base,
            target="more lookups/s than etcd's faster read mode (median), from one NameServer process",
            met=median(_runs(runs["remoting"], "rps")) > best_etcd,
            note=f"10d bottleneck per run: {_verdicts(runs['remoting'], namesrv_core_ceiling(), processes)}",
        ),
    ]  # fmt: skip
    return {
        "title": "lookups: etcd Range vs our gRPC vs our remoting, requests/s and server CPU per request",
        "rows": rows,
        "raw": {name: [r.as_dict() for r in rs] for name, rs in runs.items()},
    }


# ---------------------------------------------------------------------------- 11


def remoting_register_bodies(topics: int, count: int, *, change: bool) -> list[tuple[dict[str, str], bytes]]:
    """``count`` compressed REGISTER_BROKER (header fields, body) of broker ``big``: with ``change``
    registration k changes the k-th 1 % of the topics (queue numbers or perm, as in scenario 3),
    without it only the DataVersion differs."""
    window = max(1, topics // 100)
    base = topic_configs([f"big-{i}" for i in range(topics)])
    out = []
    for k in range(count):
        configs = dict(base)
        if change:
            for i in range(k * window, min(topics, (k + 1) * window)):
                name = f"big-{i}"
                configs[name] = TopicConfig(name, 4, 4) if k % 2 == 0 else TopicConfig(name, 8, 8, PERM_READ)
        body = encode_register_broker_body(configs, DataVersion(0, 5 if change else 6, k + 1), compressed=True)
        header = {
            "clusterName": "BenchCluster", "brokerName": "big", "brokerId": "0", "brokerAddr": "127.0.0.1:20911",
            "haServerAddr": "127.0.0.1:20912", "compressed": "true", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        }  # fmt: skip
        out.append((header, body))
    return out


class RemotingRegisterer:
    """REGISTER_BROKER over one remoting connection that stays open for the whole scenario (its
    close would remove the broker, S15): while :meth:`running`, one registration every ``period``
    seconds, round-robin over the given requests, from a thread with its own event loop."""

    def __init__(self, address: str, period: float = 1.0) -> None:
        self.address, self.period = address, period
        self.durations: list[float] = []
        self.errors: list[str] = []
        self._requests: list[tuple[dict[str, str], bytes]] = []
        self._active = threading.Event()
        self._idle = threading.Event()
        self._closed = threading.Event()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        host, port = self.address.rsplit(":", 1)
        try:
            async with await RemotingClient.connect(host, int(port)) as client:
                self._connected.set()
                n = 0
                while not self._closed.is_set():
                    if not self._active.is_set():
                        self._idle.set()
                        await asyncio.sleep(0.01)
                        continue
                    self._idle.clear()
                    start = time.perf_counter()
                    header, body = self._requests[n % len(self._requests)]
                    answer = await client.request(RequestCode.REGISTER_BROKER, header, body, timeout=120)
                    if answer.code != ResponseCode.SUCCESS:
                        self.errors.append(f"code {answer.code}: {answer.remark}")
                    self.durations.append((time.perf_counter() - start) * 1000)
                    n += 1
                    # self._active is a threading.Event (set from the bench's thread): polled.
                    while self._active.is_set() and time.perf_counter() - start < self.period:  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._connected.set()
            self._idle.set()

    def __enter__(self) -> RemotingRegisterer:
        self._thread.start()
        self._connected.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._thread.join(180)

    @contextmanager
    def running(self, requests: list[tuple[dict[str, str], bytes]]) -> Iterator[RemotingRegisterer]:
        """Register every ``period`` seconds while inside; on leaving, wait for the registration in
        flight. Raises BenchError when one failed."""
        self.durations, self.errors, self._requests = [], [], requests
        self._idle.clear()
        self._active.set()
        try:
            yield self
        finally:
            self._active.clear()
            self._idle.wait(180)
        if self.errors:
            raise BenchError(f"REGISTER_BROKER over remoting failed: {self.errors[:3]}")

    def register_once(self, request: tuple[dict[str, str], bytes]) -> None:
        """One registration, waited for."""
        with self.running([request]):
            deadline = time.monotonic() + 180
            while not self.durations and not self.errors and time.monotonic() < deadline:
                time.sleep(0.01)


def s11_remoting_during_registrations(p: Profile) -> Result:
    """Remoting lookup latency while a big broker registers over remoting every second (decoded and
    applied by the route-table process while the serving processes answer the lookups)."""
    topics = p.pick(100_000, 10_000, 300)
    seconds = p.pick(8, 1, 1)
    bodies = p.pick(8, 3, 3)
    processes, concurrency = 2, 8
    window = max(1, topics // 100)
    changing = remoting_register_bodies(topics, bodies, change=True)
    unchanged = remoting_register_bodies(topics, bodies, change=False)
    with namesrv() as server, RemotingRegisterer(server.remoting_address) as registerer:
        readable = [f"big-{i}" for i in range(min(topics, bodies * window))]
        rng = random.Random(11)
        lookups = [rng.choice(readable) for _ in range(20_000)]
        registerer.register_once(unchanged[0])  # the first registration, before anything is timed

        def run() -> LoadRun:
            return remoting_load(
                "latency", server.remoting_address, lookups, server_pid=server.pid, metrics_url=server.metrics_url,
                seconds=seconds, processes=processes, concurrency=concurrency,
            )  # fmt: skip

        quiet: list[LoadRun] = []
        runs: dict[str, list[LoadRun]] = {"cheap": [], "real": []}
        regs: dict[str, list[float]] = {key: [] for key in runs}
        counts: dict[str, list[int]] = {key: [] for key in runs}
        pauses: dict[str, list[PauseFigures]] = {key: [] for key in runs}
        for _ in range(p.repeats):
            quiet.append(run())
            for label, requests in (("cheap", unchanged[1:] + unchanged[:1]), ("real", changing)):
                before = Pauses.read(server.metrics_url)
                with registerer.running(requests):
                    runs[label].append(run())
                pauses[label].append(Pauses.read(server.metrics_url).since(before))
                regs[label].append(median(registerer.durations))
                counts[label].append(len(registerer.durations))
    client = (
        f"{processes} processes x {concurrency} RemotingClient connections, one request in flight each, "
        f"{seconds} s per run"
    )
    body = size_text(len(changing[0][1]))
    what = (
        f"remoting GET_ROUTEINFO_BY_TOPIC of random topics among the {len(readable):,} that change, while broker 'big' "
        f"sends REGISTER_BROKER with {topics:,} topics (compressed body, {body}) every second over "
        "remoting"
    )
    quiet_p99 = [r.p99_ms for r in quiet]
    base = {"p99 ms": quiet_p99, "max ms": [r.max_ms for r in quiet], "lookups/s": [r.rps for r in quiet]}

    def lookup_row(row_id: str, how: str, label: str, target: bool) -> Result:
        p99, max_ms = [r.p99_ms for r in runs[label]], [r.max_ms for r in runs[label]]
        return row(
            row_id, f"{what}: {how}; {client}",
            f"{median([r.requests for r in runs[label]]):,.0f} lookups and {median(counts[label]):.0f} registrations "
            "per run (median)",
            {"p99 ms": p99, "max ms": max_ms, "lookups/s": [r.rps for r in runs[label]],
             "registration ms (median of the run)": regs[label], **pause_metrics(pauses[label])},
            baseline="the same lookups with no registration running (same clients, same server, run just before)",
            baseline_metrics=base,
            target=LOOKUP_TAIL_TARGET if target else "none: the before of row 11a, same run",
            met=tail_met(p99, quiet_p99, max_ms) and min(counts[label]) >= 2 if target else None,
        )  # fmt: skip

    changes = f"each registration changes a different 1 % ({window:,} topics) of queue numbers or perm"
    return {
        "title": f"remoting lookups while a {topics:,}-topic broker registers over remoting every second",
        "rows": [
            lookup_row("11a", f"{changes}; decoded and applied by the route-table process", "real", True),
            lookup_row("11b", "the same topics with a new DataVersion each time (the cheap path)", "cheap", True),
        ],
        "raw": {
            "quiet": [r.as_dict() for r in quiet],
            **{key: [r.as_dict() for r in value] for key, value in runs.items()},
            "pauses": {key: [f.__dict__ for f in value] for key, value in pauses.items()},
        },
    }
