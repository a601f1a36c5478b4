"""The NameServer's own benchmark scenarios (1-9). Each takes a :class:`~bench.harness.Profile` and
returns ``{"title": what ran, "rows": [...], "raw": {...}}``; every row names what ran, its
baseline in words, its sample size and the min / median / max of at least three repeated runs.

Lookup figures are compared with a baseline measured in the same run, against the same server
process and with the same client: the machine is small and shared, so ratios carry, absolute
numbers do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

from bench.grpc_load import grpc_load
from bench.harness import (
    HEALTH_CHECK,
    LOOKUP_TAIL_TARGET,
    PICKUP_TOPIC_ROUTE,
    ROOT,
    BenchError,
    GrpcTarget,
    LoadRun,
    PauseFigures,
    Pauses,
    Profile,
    Result,
    Server,
    free_port,
    h2load,
    median,
    namesrv,
    namesrv_health_target,
    namesrv_lookup_target,
    pause_metrics,
    register_request,
    row,
    scrape,
    size_text,
    tail_met,
    timed_calls,
    topic_configs,
)
from broker_agent.agent import BrokerAgent
from broker_agent.config import load_broker_config
from broker_agent.topics import TopicSource
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import PERM_READ, DataVersion, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.wire.grpc_register_body import crc32c

HEALTH_REQUEST = health_pb2.HealthCheckRequest().SerializeToString()


def _route(channel: grpc.Channel, topic: str) -> Any:
    return (
        ns_grpc.NameServerServiceStub(channel)
        .PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=30)
        .route
    )


def _check_route(channel: grpc.Channel, topic: str, brokers: int) -> None:
    route = _route(channel, topic)
    if len(route.queue_datas) != brokers:
        raise BenchError(f"{topic} has {len(route.queue_datas)} brokers, expected {brokers}")


def _lookup(topic: str) -> bytes:
    return ns_pb2.PickupTopicRouteRequest(topic=topic).SerializeToString()


def _runs(runs: list[LoadRun], attr: str) -> list[float]:
    return [float(getattr(r, attr)) for r in runs]


# ---------------------------------------------------------------------------- 1


def s1_small_route(p: Profile) -> Result:
    """PickupTopicRoute of one topic on one broker name (master + slave) vs the empty health check,
    h2load, alternating runs; and the same lookups against a NameServer with one serving process
    (``--workers 1``), same run: what the serving processes buy."""
    seconds = p.pick(5, 1, 1)

    def small_route(server: Server, channel: grpc.Channel) -> GrpcTarget:
        stub = ns_grpc.NameServerServiceStub(channel)
        topics = topic_configs(["TopicTest"], 4)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10911", topics), timeout=10)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10921", topics, broker_id=1), timeout=10)
        _check_route(channel, "TopicTest", 1)
        return namesrv_lookup_target(server, "TopicTest", 1)

    with namesrv() as server, server.channel() as channel, namesrv("--workers", "1") as single:
        lookup_target, empty_target = small_route(server, channel), namesrv_health_target(server)
        with single.channel() as single_channel:
            single_target = small_route(single, single_channel)
        workers = server.workers
        empties, lookups, singles = [], [], []
        for _ in range(p.repeats):  # alternating, so drift of a noisy machine hits all alike
            empties.append(h2load(empty_target, seconds=seconds, warm_up=p.warm_up))
            lookups.append(h2load(lookup_target, seconds=seconds, warm_up=p.warm_up))
            singles.append(h2load(single_target, seconds=seconds, warm_up=p.warm_up))
    throughput = [lk.rps / e.rps for lk, e in zip(lookups, empties, strict=True)]
    p99 = [lk.p99_ms / e.p99_ms for lk, e in zip(lookups, empties, strict=True)]
    scaling = [lk.rps / one.rps for lk, one in zip(lookups, singles, strict=True)]
    what = (
        f"PickupTopicRoute of one topic (4 queues) on one broker name with master + slave (2 addresses); "
        f"h2load 4 connections x 16 streams, {seconds} s per run after {p.warm_up:g} s warm-up"
    )
    lookup_metrics = {
        "lookups/s": _runs(lookups, "rps"),
        "p99 ms": _runs(lookups, "p99_ms"),
        "server CPU us/lookup": [r.server_cpu_us_per_request for r in lookups],
        "server cores busy": [r.server_cores for r in lookups],
    }
    return {
        "title": "PickupTopicRoute, one topic on one broker name (master + slave), 64 in flight",
        "rows": [
            row(
                "1",
                f"{what}; {workers} serving processes (the default: one per CPU)",
                f"{median(_runs(lookups, 'requests')):,.0f} lookups per run (median)",
                {**lookup_metrics, "throughput / empty call": throughput, "p99 / empty call's p99": p99},
                baseline="the gRPC health check (an RPC that does nothing) on the same server with the same "
                "h2load settings, run alternately with the lookups",
                baseline_metrics={
                    "calls/s": _runs(empties, "rps"),
                    "p99 ms": _runs(empties, "p99_ms"),
                    "server CPU us/call": [r.server_cpu_us_per_request for r in empties],
                },
                target="median throughput >= 0.9 x empty call; median p99 <= 1.5 x empty call's p99",
                met=median(throughput) >= 0.9 and median(p99) <= 1.5,
            ),
            row(
                "1b",
                f"{what}; the default serving processes against one (--workers 1)",
                f"{median(_runs(lookups, 'requests')):,.0f} lookups per run (median)",
                {**lookup_metrics, "lookups/s vs --workers 1": scaling},
                baseline="the same lookups against a NameServer with one serving process (--workers 1), run "
                "alternately in the same run",
                baseline_metrics={
                    "lookups/s": _runs(singles, "rps"),
                    "p99 ms": _runs(singles, "p99_ms"),
                    "server CPU us/lookup": [r.server_cpu_us_per_request for r in singles],
                    "server cores busy": [r.server_cores for r in singles],
                },
                target=">= 1.5 x the --workers 1 lookups/s (median), issue 29",
                met=median(scaling) >= 1.5 if workers > 1 else None,
            ),
        ],
        "raw": {
            "lookups": [r.as_dict() for r in lookups],
            "empty_calls": [r.as_dict() for r in empties],
            "one_serving_process": [r.as_dict() for r in singles],
        },
    }


# ---------------------------------------------------------------------------- 2


def load_cluster(stub: Any, brokers: int, topics: int, per_topic: int) -> None:
    """Register ``brokers`` masters; topic t lives on broker names (t * per_topic + k) % brokers."""
    assignment: list[list[str]] = [[] for _ in range(brokers)]
    for t in range(topics):
        for k in range(per_topic):
            assignment[(t * per_topic + k) % brokers].append(f"topic-{t}")
    for b, names in enumerate(assignment):
        request = register_request(f"broker-{b}", f"10.1.{b // 250}.{b % 250}:10911", topic_configs(names))
        stub.RegisterBroker(request, timeout=120)


def s2_large_cluster(p: Profile) -> Result:
    """Lookups of topics drawn at random from the whole table: cold (first lookup of each topic:
    route built and encoded) and warm (the same topics again: cache hits), vs the health check."""
    brokers, topics = p.pick((1_000, 100_000), (100, 5_000), (10, 300))
    sample = p.pick(20_000, 500, 60)
    per_topic = 8
    processes, concurrency = 2, 32
    rng = random.Random(13)
    drawn = rng.sample(range(1, topics), sample * p.repeats)  # topic-0 is looked up before the runs
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        started = time.perf_counter()
        load_cluster(stub, brokers, topics, per_topic)
        load_seconds = time.perf_counter() - started
        _check_route(channel, "topic-0", per_topic)

        def run(requests: list[bytes], path: str, expect: int) -> LoadRun:
            return grpc_load(
                server.address, path, requests, server_pid=server.pid, processes=processes,
                concurrency=concurrency, expect_brokers=expect,
            )  # fmt: skip

        empties, colds, warms, rss = [], [], [], []
        for index in range(p.repeats):
            requests = [_lookup(f"topic-{t}") for t in drawn[index * sample : (index + 1) * sample]]
            empties.append(run([HEALTH_REQUEST] * sample, HEALTH_CHECK, 0))
            colds.append(run(requests, PICKUP_TOPIC_ROUTE, per_topic))
            warms.append(run(requests, PICKUP_TOPIC_ROUTE, per_topic))
            rss.append(server.rss_bytes() / 2**20)
    client = f"{processes} grpc.aio client processes x {concurrency} calls in flight"
    baseline = f"the gRPC health check (an RPC that does nothing), {sample:,} calls with the same client, same server"
    table = (
        f"{brokers:,} brokers, {topics:,} topics on {per_topic} broker names each ({topics * per_topic:,} QueueData)"
    )

    def lookup_row(row_id: str, runs: list[LoadRun], which: str, target: str, met: bool | None) -> Result:
        return row(
            row_id, f"PickupTopicRoute of {sample:,} distinct topics drawn at random from {table}: {which}; {client}",
            f"{sample:,} lookups per run, a fresh random sample each run",
            {
                "lookups/s": _runs(runs, "rps"),
                "p99 ms": _runs(runs, "p99_ms"),
                "server CPU us/lookup": [r.server_cpu_us_per_request for r in runs],
                "throughput / empty call": [r.rps / e.rps for r, e in zip(runs, empties, strict=True)],
            },
            baseline=baseline,
            baseline_metrics={
                "calls/s": _runs(empties, "rps"), "p99 ms": _runs(empties, "p99_ms"),
                "server CPU us/call": [r.server_cpu_us_per_request for r in empties],
            },
            target=target, met=met,
        )  # fmt: skip

    warm_ratio = median([w.rps / e.rps for w, e in zip(warms, empties, strict=True)])
    return {
        "title": f"random-topic lookups with {table} loaded (loaded in {load_seconds:.0f} s)",
        "rows": [
            lookup_row(
                "2a",
                colds,
                "first lookup of each (cold cache: route built from the tables and encoded)",
                "none: the one-off cost of a topic's first lookup after a change (row 2b carries the target)",
                None,
            ),
            lookup_row(
                "2b",
                warms,
                "the same topics again (warm cache: encoded route served from the per-topic cache)",
                "median throughput >= 0.85 x empty call",
                warm_ratio >= 0.85,
            ),
            row(
                "2c",
                f"RSS of the NameServer holding {table}, after each run's lookups (the route cache grows by "
                f"{sample:,} entries per run)",
                "one reading per run",
                {"RSS MiB": rss},
                baseline="none (absolute; the Java NameServer's RSS idle is 354 MB)",
                target="RSS <= 1 GiB",
                met=max(rss) <= 1024,
            ),
        ],
        "raw": {
            "brokers": brokers,
            "topics": topics,
            "queue_datas": topics * per_topic,
            "load_seconds": round(load_seconds, 1),
            "empty_calls": [r.as_dict() for r in empties],
            "cold": [r.as_dict() for r in colds],
            "warm": [r.as_dict() for r in warms],
        },
    }


# ---------------------------------------------------------------------------- 3


def changing_bodies(topics: int, count: int) -> list[ns_pb2.RegisterBrokerRequest]:
    """``count`` registrations of broker ``big`` with ``topics`` topics; registration k changes the
    k-th 1 % of the topics (queue numbers 8 -> 4 for even k, perm 6 -> 4 (read-only) for odd k)
    and carries the others as in the first registration, so consecutive registrations change 2 %
    of the topics (the k-th 1 % and the (k-1)-th back)."""
    window = max(1, topics // 100)
    base = topic_configs([f"big-{i}" for i in range(topics)])
    requests = []
    for k in range(count):
        configs = dict(base)
        for i in range(k * window, min(topics, (k + 1) * window)):
            name = f"big-{i}"
            configs[name] = TopicConfig(name, 4, 4) if k % 2 == 0 else TopicConfig(name, 8, 8, PERM_READ)
        requests.append(register_request("big", "127.0.0.1:20911", configs, version=DataVersion(0, 2, k + 1)))
    return requests


class Registerer:
    """A thread that sends ``requests`` round-robin, one every ``period`` seconds, while running."""

    def __init__(self, stub: Any, requests: list[ns_pb2.RegisterBrokerRequest], period: float = 1.0) -> None:
        self.stub, self.requests, self.period = stub, requests, period
        self.durations: list[float] = []
        self._stop = threading.Event()
        self._next = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            self.stub.RegisterBroker(self.requests[self._next % len(self.requests)], timeout=120)
            self.durations.append((time.perf_counter() - start) * 1000)
            self._next += 1
            self._stop.wait(max(0.0, self.period - (time.perf_counter() - start)))

    @contextmanager
    def running(self) -> Iterator[Registerer]:
        self.durations = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


def s3_lookups_during_registrations(p: Profile) -> Result:
    """Lookup latency while a big broker registers every second: topics really changing (1 % per
    registration, invalidating routes the lookups read), decoded and applied by the route-table
    process while the serving processes answer the lookups; and the cheap case (same topics)."""
    topics = p.pick(100_000, 10_000, 500)
    seconds = p.pick(8, 1, 1)
    bodies = p.pick(20, 4, 4)
    processes, concurrency = 2, 16
    window = max(1, topics // 100)
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        changing = changing_bodies(topics, bodies)
        unchanged = [
            register_request("big", "127.0.0.1:20911", topic_configs([f"big-{i}" for i in range(topics)]),
                             version=DataVersion(0, 3, k + 1))
            for k in range(bodies)
        ]  # fmt: skip
        stub.RegisterBroker(unchanged[0], timeout=120)
        rng = random.Random(3)
        # The lookups read the topics the registrations change (the first `bodies` windows of 1 %).
        readable = [f"big-{i}" for i in range(min(topics, bodies * window))]
        lookups = [_lookup(rng.choice(readable)) for _ in range(20_000)]
        _check_route(channel, readable[0], 1)

        def run() -> LoadRun:
            return grpc_load(
                server.address, PICKUP_TOPIC_ROUTE, lookups, server_pid=server.pid, processes=processes,
                concurrency=concurrency, seconds=seconds, expect_brokers=1,
            )  # fmt: skip

        quiet: list[LoadRun] = []
        runs: dict[str, list[LoadRun]] = {"cheap": [], "real": []}
        reg_ms: dict[str, list[float]] = {key: [] for key in runs}
        counts: dict[str, list[int]] = {key: [] for key in runs}
        pauses: dict[str, list[PauseFigures]] = {key: [] for key in runs}
        for _ in range(p.repeats):
            quiet.append(run())
            for key, requests in (("cheap", unchanged[1:] + unchanged[:1]), ("real", changing)):
                before = Pauses.read(server.metrics_url)
                with Registerer(stub, requests).running() as registerer:
                    runs[key].append(run())
                pauses[key].append(Pauses.read(server.metrics_url).since(before))
                reg_ms[key].append(median(registerer.durations))
                counts[key].append(len(registerer.durations))
    client = f"{processes} grpc.aio client processes x {concurrency} calls in flight, {seconds} s per run"
    reads = f"random topics among the {len(readable):,} topics the registrations change"
    baseline = "the same lookups with no registration running (same client, same server, run just before)"
    quiet_p99 = _runs(quiet, "p99_ms")
    base = {"p99 ms": quiet_p99, "max ms": _runs(quiet, "max_ms"), "lookups/s": _runs(quiet, "rps")}

    def lookup_row(row_id: str, what: str, key: str, target: bool) -> Result:
        p99, max_ms = _runs(runs[key], "p99_ms"), _runs(runs[key], "max_ms")
        return row(
            row_id, f"PickupTopicRoute of {reads}, while broker 'big' ({topics:,} topics) registers every second: "
            f"{what}; {client}",
            f"{median(_runs(runs[key], 'requests')):,.0f} lookups and {median(counts[key]):.0f} registrations per run "
            "(median)",
            {"p99 ms": p99, "max ms": max_ms, "lookups/s": _runs(runs[key], "rps"),
             "registration ms (median of the run)": reg_ms[key], **pause_metrics(pauses[key])},
            baseline=baseline, baseline_metrics=base,
            target=LOOKUP_TAIL_TARGET if target else "none: the before of row 3a, same run",
            met=tail_met(p99, quiet_p99, max_ms) and min(counts[key]) >= 2 if target else None,
        )  # fmt: skip

    real_what = (
        f"each registration changes the queue numbers or perm of a different 1 % ({window:,} topics) and restores "
        "the previous 1 % (full decode, S07 updates, cached routes dropped)"
    )
    return {
        "title": f"lookups while a {topics:,}-topic broker registers every second",
        "rows": [
            lookup_row("3a", f"{real_what}; decoded and applied by the route-table process", "real", True),
            lookup_row(
                "3b",
                "the same topic table with a new DataVersion each time (the cheap 'topics unchanged' path)",
                "cheap",
                True,
            ),
        ],
        "raw": {
            "quiet": [r.as_dict() for r in quiet],
            **{key: [r.as_dict() for r in value] for key, value in runs.items()},
            "pauses": {key: [f.__dict__ for f in value] for key, value in pauses.items()},
        },
    }


# ---------------------------------------------------------------------------- 4


def _topics_gauge(server: Server) -> float:
    return scrape(server.metrics_url)["namesrv_topics"][0][1]


def s4_register_sizes(p: Profile) -> Result:
    """The first RegisterBroker of a broker with 100 / 10,000 / 100,000 topics; met when every run's
    topics are all in the table (the topic gauge grew by exactly that many) and a sample of them
    resolves to the new broker."""
    sizes = p.pick((100, 10_000, 100_000), (100, 1_000, 10_000), (10, 100, 1_000))
    latencies: dict[int, list[float]] = {size: [] for size in sizes}
    body_bytes: dict[int, int] = {}
    visible = True
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        rng = random.Random(4)
        for run in range(p.repeats):
            for size in sizes:
                names = [f"t{size}-{run}-{i}" for i in range(size)]
                broker = f"b{size}-{run}"
                request = register_request(broker, f"10.2.{run}.{sizes.index(size)}:10911", topic_configs(names))
                body_bytes[size] = len(request.body)
                before = _topics_gauge(server)
                start = time.perf_counter()
                stub.RegisterBroker(request, timeout=300)
                latencies[size].append((time.perf_counter() - start) * 1000)
                visible = visible and _topics_gauge(server) - before == size
                for name in rng.sample(names, min(5, size)):
                    visible = visible and [q.broker_name for q in _route(channel, name).queue_datas] == [broker]
    smallest = sizes[0]
    rows = [
        row(
            f"4{'abc'[index]}",
            f"first RegisterBroker of a broker with {size:,} topics ({size_text(body_bytes[size])} body), "
            "client-side latency of one blocking call",
            "one registration per run",
            {"ms": latencies[size]},
            baseline=f"the {smallest:,}-topic registration of the same runs (the fixed cost of a call)"
            if size != smallest
            else "none (absolute)",
            baseline_metrics={"ms": latencies[smallest]} if size != smallest else None,
            target=f"all {size:,} topics registered and resolvable (Java NameServer fails past ~60-70k: 16 MiB frame "
            "limit)"
            if size == sizes[-1]
            else "",
            met=visible if size == sizes[-1] else None,
        )
        for index, size in enumerate(sizes)
    ]
    return {"title": f"one RegisterBroker with {' / '.join(f'{s:,}' for s in sizes)} topics", "rows": rows, "raw": {}}


# ---------------------------------------------------------------------------- 5


def registration_seconds(metrics_url: str) -> tuple[float, float]:
    """(sum, count) of ``namesrv_registration_duration_seconds`` scraped from the server, both doors
    (``protocol`` label) together."""
    samples = scrape(metrics_url)
    total = sum(value for _, value in samples["namesrv_registration_duration_seconds_sum"])
    count = sum(value for _, value in samples["namesrv_registration_duration_seconds_count"])
    return total, count


def _server_ms(metrics_url: str, call: Callable[[], None]) -> tuple[float, float]:
    """(client ms, server processing ms) of one registration call; the server's time is the change of
    ``namesrv_registration_duration_seconds_sum`` across the call (it times accepted and rejected
    registrations alike)."""
    before = registration_seconds(metrics_url)
    start = time.perf_counter()
    call()
    client = (time.perf_counter() - start) * 1000
    after = registration_seconds(metrics_url)
    if after[1] - before[1] != 1:
        raise BenchError("another registration ran during the measured one")
    return client, (after[0] - before[0]) * 1000


def s5_unchanged_broker(p: Profile) -> Result:
    """QueryDataVersion and heartbeat of a big broker vs a 10-topic one; an unchanged re-registration
    (accepted) and one with a wrong checksum (rejected), each split into client time and server time."""
    big_topics = p.pick(100_000, 10_000, 500)
    calls = p.pick(500, 100, 20)
    per_run = p.pick(15, 5, 3)
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        big = register_request("big", "127.0.0.1:20911", topic_configs([f"big-{i}" for i in range(big_topics)]))
        small = register_request("small", "127.0.0.1:30911", topic_configs([f"small-{i}" for i in range(10)]))
        stub.RegisterBroker(big, timeout=120)
        stub.RegisterBroker(small, timeout=120)
        qdv: dict[str, list[float]] = {"big": [], "small": []}
        beat: dict[str, list[float]] = {"big": [], "small": []}
        wrong_crc = ns_pb2.RegisterBrokerRequest()
        wrong_crc.CopyFrom(big)
        wrong_crc.body_crc32c ^= 1

        def reject() -> None:
            with contextlib.suppress(grpc.RpcError):  # DATA_LOSS, as wanted (checked below)
                stub.RegisterBroker(wrong_crc, timeout=60)

        accepted: dict[str, list[float]] = {"client": [], "server": []}
        rejected: dict[str, list[float]] = {"client": [], "server": []}
        crc_ms: list[float] = []
        for _ in range(p.repeats):
            for label, request in (("big", big), ("small", small)):
                ident = {k: getattr(request, k) for k in ("cluster_name", "broker_name", "broker_id", "broker_addr")}
                query = ns_pb2.QueryDataVersionRequest(**ident)
                query.data_version.timestamp, query.data_version.counter = 1, 1
                timed_calls(stub.QueryDataVersion, query, 20)  # warm-up
                qdv[label].append(median(timed_calls(stub.QueryDataVersion, query, calls)))
                beat[label].append(
                    median(timed_calls(stub.BrokerHeartbeat, ns_pb2.BrokerHeartbeatRequest(**ident), calls))
                )
            run_accepted: dict[str, list[float]] = {"client": [], "server": []}
            run_rejected: dict[str, list[float]] = {"client": [], "server": []}
            for _ in range(per_run):  # interleaved, so drift on a noisy machine hits both alike
                for out, call in ((run_accepted, lambda: stub.RegisterBroker(big, timeout=60)), (run_rejected, reject)):
                    client_ms, server_ms = _server_ms(server.metrics_url, call)
                    out["client"].append(client_ms)
                    out["server"].append(server_ms)
            for out, run_out in ((accepted, run_accepted), (rejected, run_rejected)):
                for key in ("client", "server"):
                    out[key].append(median(run_out[key]))
            start = time.perf_counter()
            for _ in range(10):
                crc32c(big.body)
            crc_ms.append((time.perf_counter() - start) / 10 * 1000)
        failures = scrape(server.metrics_url)["namesrv_body_checksum_failures_total"][0][1]
        if failures != p.repeats * per_run:
            raise BenchError(f"{failures:.0f} checksum failures counted, expected {p.repeats * per_run}")
    qdv_ratio = [b / s for b, s in zip(qdv["big"], qdv["small"], strict=True)]
    beat_ratio = [b / s for b, s in zip(beat["big"], beat["small"], strict=True)]
    body = size_text(len(big.body))
    sample = f"{calls} sequential calls per run (median of the run)"
    reg_sample = f"{per_run} calls per run, accepted and rejected interleaved (median of the run)"
    crc_baseline = f"CRC32C of the same {body} body computed in the bench process (what S01 alone costs)"
    rows = [
        row(
            "5a", f"QueryDataVersion of a {big_topics:,}-topic broker, one blocking gRPC call at a time", sample,
            {"ms": qdv["big"], "ratio to 10-topic broker": qdv_ratio},
            baseline="the same call for a 10-topic broker, same run",
            baseline_metrics={"ms": qdv["small"]}, target="median ratio <= 1.2", met=median(qdv_ratio) <= 1.2,
        ),
        row(
            "5b", f"BrokerHeartbeat of a {big_topics:,}-topic broker, one blocking gRPC call at a time", sample,
            {"ms": beat["big"], "ratio to 10-topic broker": beat_ratio},
            baseline="the same call for a 10-topic broker, same run",
            baseline_metrics={"ms": beat["small"]}, target="median ratio <= 1.2", met=median(beat_ratio) <= 1.2,
        ),
        row(
            "5c", f"accepted re-registration of the {big_topics:,}-topic broker with an unchanged {body} body: "
            "client latency and server processing (namesrv_registration_duration_seconds)", reg_sample,
            {"server ms": accepted["server"], "client ms": accepted["client"]}, baseline=crc_baseline,
            baseline_metrics={"ms": crc_ms}, target="server processing <= CRC32C + 1 ms (no decode, no table work)",
            met=median(accepted["server"]) <= median(crc_ms) + 1.0,
        ),
        row(
            "5d", f"rejected registration: the same {body} body with a wrong body_crc32c (DATA_LOSS, S01): client "
            "latency and server processing", reg_sample,
            {"server ms": rejected["server"], "client ms": rejected["client"]}, baseline=crc_baseline,
            baseline_metrics={"ms": crc_ms}, target="server processing <= CRC32C + 1 ms (checksum only)",
            met=median(rejected["server"]) <= median(crc_ms) + 1.0,
        ),
    ]  # fmt: skip
    return {
        "title": f"QueryDataVersion, heartbeat and re-registration of a {big_topics:,}-topic broker",
        "rows": rows,
        "raw": {},
    }


# ---------------------------------------------------------------------------- 6


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def s6_expiry_scan(p: Profile) -> Result:
    """Expiry scan of a table with 10,000 brokers, 1,000 of them expired (in process: the scan is
    pure table work)."""
    brokers = p.pick(10_000, 5_000, 1_000)
    scans = p.pick(5_000, 500, 100)
    idle, removal, correct = [], [], True
    for _ in range(p.repeats):
        clock = _Clock()
        table = RouteInfoManager(clock)
        for b in range(brokers):
            table.register_broker(
                cluster_name="c", broker_name=f"b{b}", broker_id=0, broker_addr=f"10.3.{b // 250}.{b % 250}:10911",
                heartbeat_timeout_millis=10_000 if b % 10 == 0 else 120_000,
                topic_configs={f"t{b}": TopicConfig(f"t{b}", 4, 4)},
            )  # fmt: skip
        start = time.perf_counter()
        for _ in range(scans):
            if table.scan_not_active_broker():
                correct = False
        idle.append((time.perf_counter() - start) / scans * 1000)
        clock.now += 10_001
        start = time.perf_counter()
        removed = table.scan_not_active_broker()
        removal.append((time.perf_counter() - start) * 1000)
        correct = correct and sorted(r.broker_name for r in removed) == sorted(f"b{b}" for b in range(0, brokers, 10))
        correct = correct and len(table.broker_live_table) == brokers * 9 // 10
    return {
        "title": f"expiry scan, {brokers:,} brokers, {brokers // 10:,} expired",
        "rows": [
            row(
                "6a",
                f"one expiry scan of {brokers:,} live brokers, none expired (in process)",
                f"{scans:,} scans per run (mean)",
                {"ms per scan": idle},
                baseline="none (absolute)",
                target="<= 1 ms per scan",
                met=max(idle) <= 1,
            ),
            row(
                "6b",
                f"the scan that removes {brokers // 10:,} expired brokers of {brokers:,} (in process)",
                "one scan per run",
                {"ms": removal},
                baseline="none (absolute)",
                target="removals correct (exactly the expired brokers)",
                met=correct,
            ),
        ],
        "raw": {},
    }


# ---------------------------------------------------------------------------- 7


def s7_memory(p: Profile) -> Result:
    """RSS of an idle NameServer and of one holding 10 brokers x 100 topics, one new process per run."""
    idle, loaded = [], []
    for _ in range(p.repeats):
        with namesrv() as server, server.channel() as channel:
            time.sleep(p.pick(1.0, 0.5, 0.2))
            idle.append(server.rss_bytes() / 2**20)
            stub = ns_grpc.NameServerServiceStub(channel)
            for b in range(10):
                names = [f"b{b}-t{i}" for i in range(100)]
                stub.RegisterBroker(register_request(f"b{b}", f"10.4.0.{b}:10911", topic_configs(names)), timeout=10)
            for i in range(0, 1000, 10):
                stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=f"b{i // 100}-t{i % 100}"), timeout=10)
            loaded.append(server.rss_bytes() / 2**20)
    limit = 60 * 10**6 / 2**20
    return {
        "title": "RSS idle and with 10 brokers x 100 topics",
        "rows": [
            row(
                "7", "RSS of a NameServer process: idle, then holding 10 brokers x 100 topics after 100 lookups",
                "one new process per run", {"loaded MiB": loaded, "idle MiB": idle},
                baseline="none (absolute; RocketMQ's Rust rewrite 59 MB, the Java NameServer 354 MB)",
                target="RSS <= 60 MB (57.2 MiB)", met=max(loaded + idle) <= limit,
            )
        ],
        "raw": {},
    }  # fmt: skip


# ---------------------------------------------------------------------------- 8


def s8_agent_black_hole(p: Profile) -> Result:
    """An agent round to 3 NameServers, one of them black-holing traffic (accepts TCP, never answers)."""
    timeout_ms = p.pick(2000, 500, 500)
    rounds_count = max(p.repeats, p.pick(5, 4, 3))
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    try:
        with namesrv() as first, namesrv() as second:
            healthy = [first.address, second.address]
            black = f"127.0.0.1:{hole.getsockname()[1]}"

            async def rounds(addrs: list[str]) -> tuple[list[float], dict[str, list[float]]]:
                properties = {
                    "brokerName": "broker-a", "brokerIP1": "127.0.0.1", "namesrvAddr": ";".join(addrs),
                    "registerBrokerTimeoutMills": str(timeout_ms),
                }  # fmt: skip
                config = load_broker_config(properties, "bench")
                source = TopicSource(config, ROOT / "examples" / "topics-quickstart.json", lambda: 0)
                source.load_initial()
                agent = BrokerAgent(config, source)
                per_ns: dict[str, list[float]] = {a: [] for a in addrs}
                original = agent.metrics.timed_registration

                async def timed(addr: str, call: Any) -> Any:
                    start = time.perf_counter()
                    try:
                        return await original(addr, call)
                    finally:
                        per_ns[addr].append((time.perf_counter() - start) * 1000)

                agent.metrics.timed_registration = timed  # type: ignore[method-assign,assignment]
                durations = []
                try:
                    for _ in range(rounds_count + 1):  # the first round opens connections: not counted
                        start = time.perf_counter()
                        await agent.register_all(force=True)
                        durations.append((time.perf_counter() - start) * 1000)
                finally:
                    await agent.close()
                return durations[1:], {a: v[1:] for a, v in per_ns.items()}

            _, baseline = asyncio.run(rounds(healthy))
            durations, per_ns = asyncio.run(rounds([healthy[0], black, healthy[1]]))
    finally:
        hole.close()
    with_hole = [max(per_ns[a][i] for a in healthy) for i in range(rounds_count)]
    without = [max(baseline[a][i] for a in healthy) for i in range(rounds_count)]
    return {
        "title": "agent round to 3 NameServers, one black-holing",
        "rows": [
            row(
                "8a",
                "broker agent round (RegisterBroker to 3 NameServers in parallel), one NameServer accepts TCP and "
                "never answers: the slower of the two healthy NameServers' answer",
                f"{rounds_count} rounds (one per run)",
                {"ms": with_hole},
                baseline="the same rounds to the two healthy NameServers only",
                baseline_metrics={"ms": without},
                target="median <= max(2 x baseline, baseline + 5 ms)",
                met=median(with_hole) <= max(2 * median(without), median(without) + 5),
            ),
            row(
                "8b",
                f"the same rounds: whole round, bounded by registerBrokerTimeoutMills = {timeout_ms} ms",
                f"{rounds_count} rounds (one per run)",
                {"ms": durations},
                baseline=f"the configured timeout, {timeout_ms} ms",
                target=f"<= {timeout_ms * 1.1 + 100:.0f} ms",
                met=max(durations) <= timeout_ms * 1.1 + 100,
            ),
        ],
        "raw": {"black_hole_call_ms": per_ns[black]},
    }


# ---------------------------------------------------------------------------- 9


class _Agent:
    """A broker agent process (``python -m broker_agent``) with sessions; stderr collected."""

    def __init__(self, namesrv_addr: str, *extra: str) -> None:
        args = [
            sys.executable, "-m", "broker_agent", "--broker-config", str(ROOT / "examples" / "broker-a.properties"),
            "--topics-json", str(ROOT / "examples" / "topics-quickstart.json"), "--namesrv-addr", namesrv_addr,
            "--set", "brokerIP1=127.0.0.1", *extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = 30) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: any(text in line for line in self.lines), timeout):
                raise BenchError(f"agent never logged {text!r}: {''.join(self.lines[-10:])}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(10)


def _has_route(server: Server) -> bool:
    with server.channel() as channel:
        try:
            _route(channel, "TopicTest")
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise
    return True


def _seconds_until(check: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise BenchError(f"condition not met within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


def s9_liveness(p: Profile) -> Result:
    """The liveness latencies that tests only bound loosely: an agent SIGKILLed -> routes gone (S15);
    a SIGSTOPped agent -> removed after its heartbeat timeout (S13); a NameServer restarted -> the
    agent's route back."""
    scan = ("--scan-not-active-broker-interval", "200")
    timeout_ms = p.pick(2000, 1000, 1000)
    killed, stopped, restarted = [], [], []
    for _ in range(p.repeats):
        with namesrv(*scan) as server:
            agent = _Agent(server.address)
            try:
                agent.wait_for("session with")
                agent.process.kill()
                killed.append(_seconds_until(lambda: not _has_route(server), 30) * 1000)
            finally:
                agent.stop()
            agent = _Agent(server.address, "--set", f"brokerNotActiveTimeoutMillis={timeout_ms}")
            try:
                agent.wait_for("session with")
                agent.process.send_signal(signal.SIGSTOP)
                stopped.append(_seconds_until(lambda: not _has_route(server), 30) * 1000)
            finally:
                agent.stop()
        port = free_port()
        with namesrv("--port", str(port), *scan) as server:
            agent = _Agent(server.address)
            try:
                agent.wait_for("session with")
                server.process.kill()
                server.process.wait(10)
                with namesrv("--port", str(port), *scan) as again:
                    restarted.append(_seconds_until(lambda: _has_route(again), 60) * 1000)
            finally:
                agent.stop()
    agent_what = "broker agent process (examples/broker-a.properties) with a liveness session"
    return {
        "title": "liveness: agent killed, agent stopped, NameServer restarted",
        "rows": [
            row(
                "9a",
                f"{agent_what} SIGKILLed: time until PickupTopicRoute says NOT_FOUND (S15, session end)",
                "one kill per run",
                {"ms": killed},
                baseline="none (absolute; the heartbeat timeout is 120 s)",
                target="<= 1000 ms",
                met=max(killed) <= 1000,
            ),
            row(
                "9b",
                f"{agent_what} SIGSTOPped, brokerNotActiveTimeoutMillis={timeout_ms}: time until NOT_FOUND "
                "(S13, expiry scan every 200 ms)",
                "one stop per run",
                {"ms": stopped},
                baseline=f"the heartbeat timeout, {timeout_ms} ms (the last heartbeat is up to {timeout_ms // 4} ms "
                "older than the stop)",
                target=f"between {timeout_ms * 3 // 4} and {timeout_ms + 200 + 600} ms",
                met=min(stopped) >= timeout_ms * 3 // 4 and max(stopped) <= timeout_ms + 800,
            ),
            row(
                "9c",
                f"NameServer SIGKILLed and restarted on its port, {agent_what} reconnecting: time from the new "
                "server answering health checks until the route is back",
                "one restart per run",
                {"ms": restarted},
                baseline="none (absolute; the agent's periodic round is 30 s)",
                target="<= 1000 ms",
                met=max(restarted) <= 1000,
            ),
        ],
        "raw": {},
    }
