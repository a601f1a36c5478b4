"""Scenarios 13 and 14 (issue 21): a NameServer holding a very large table, and a cluster restart.

- 13: 200,000 topics over 1,000 brokers, each topic on 4 broker names (800,000 QueueData):
  garbage-collection pauses and event-loop lag while lookups run and brokers re-register with
  changes, the RSS per topic (what ``deploy/kubernetes/namesrv.yaml``'s memory is sized from), and
  lookup latency against the same lookups with no registration running.
- 14: ten brokers of 20,000 topics each register at the same moment (a cluster restart) while
  lookups run; every registration must land.

GC pauses and loop lag are read from the server's own histograms (``namesrv_gc_pause_seconds``,
``namesrv_event_loop_lag_seconds``) before and after each run: the longest pause is known to its
bucket (the buckets around 20 ms are 15, 20 and 30 ms).
"""

from __future__ import annotations

import gc
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.grpc_load import grpc_load
from bench.harness import (
    LOOKUP_TAIL_TARGET,
    PICKUP_TOPIC_ROUTE,
    BenchError,
    LoadRun,
    PauseFigures,
    Pauses,
    Profile,
    Result,
    Server,
    median,
    namesrv,
    pause_metrics,
    register_request,
    row,
    scrape,
    tail_met,
)
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import PERM_READ, DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager


def _lookup(topic: str) -> bytes:
    return ns_pb2.PickupTopicRouteRequest(topic=topic).SerializeToString()


def _gauge(server: Server, name: str) -> float:
    return scrape(server.metrics_url)[name][0][1]


def _broker_topics(brokers: int, topics: int, per_topic: int) -> list[list[str]]:
    """Topic t lives on broker names (t * per_topic + k) % brokers, k < per_topic (as scenario 2)."""
    assignment: list[list[str]] = [[] for _ in range(brokers)]
    for t in range(topics):
        for k in range(per_topic):
            assignment[(t * per_topic + k) % brokers].append(f"topic-{t}")
    return assignment


def _addr(b: int) -> str:
    return f"10.1.{b // 250}.{b % 250}:10911"


def _configs(names: list[str], changed: range = range(0)) -> dict[str, TopicConfig]:
    """8 queues each; the topics at the ``changed`` positions read-only."""
    out = {name: TopicConfig(name, 8, 8) for name in names}
    for i in changed:
        out[names[i]] = TopicConfig(names[i], 8, 8, PERM_READ)
    return out


class Churn:
    """A thread that re-registers one broker after another, ``per_second`` a second, each with a new
    DataVersion and 1 % of its topics (at least one) changed: the steady state of a large cluster."""

    def __init__(self, stub: Any, assignment: list[list[str]], per_second: float) -> None:
        self.stub, self.assignment, self.period = stub, assignment, 1.0 / per_second
        self.count = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        rng = random.Random(12)
        while not self._stop.is_set():
            start = time.perf_counter()
            b = rng.randrange(len(self.assignment))
            names = self.assignment[b]
            window = max(1, len(names) // 100)
            first = rng.randrange(max(1, len(names) - window))
            self.count += 1
            request = register_request(
                f"broker-{b}", _addr(b), _configs(names, range(first, first + window)),
                version=DataVersion(0, 2, self.count),
            )  # fmt: skip
            self.stub.RegisterBroker(request, timeout=120)
            self._stop.wait(max(0.0, self.period - (time.perf_counter() - start)))

    @contextmanager
    def running(self) -> Iterator[Churn]:
        self._stop.clear()
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


def full_collection_ms(brokers: int, topics: int, per_topic: int, *, old_layout: bool) -> tuple[float, float]:
    """(median ms of 5 full collections, RSS growth MiB) in this process with ``topics`` x ``per_topic``
    QueueData held by a real :class:`RouteInfoManager` (registered broker by broker, one lookup of
    every topic cached), or, with ``old_layout``, by the layout the table had before issue 21 (a
    ``QueueData`` NamedTuple per entry in dicts of dicts, the topic index as sets, cached routes as
    dicts)."""
    rss_before = _rss_mib()
    holder: Any
    if old_layout:
        table: dict[str, dict[str, QueueData]] = {}
        index: dict[str, set[str]] = {}
        cache: dict[str, dict[Any, bytes]] = {}
        for t in range(topics):
            topic = f"topic-{t}"
            queue_datas = table.setdefault(topic, {})
            for k in range(per_topic):
                name = f"broker-{(t * per_topic + k) % brokers}"
                queue_datas[name] = QueueData(name, 8, 8, 6, 0)
                index.setdefault(name, set()).add(topic)
            cache[topic] = {_encode: b"route"}
        holder = (table, index, cache)
    else:
        holder = RouteInfoManager(lambda: 1_700_000_000_000)
        for b, names in enumerate(_broker_topics(brokers, topics, per_topic)):
            holder.register_broker(
                cluster_name="c", broker_name=f"broker-{b}", broker_id=0, broker_addr=_addr(b),
                topic_configs=_configs(names),
            )  # fmt: skip
        for t in range(topics):
            holder.pickup_topic_route_cached(f"topic-{t}", _encode)
    gc.collect()
    gc.collect()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - start) * 1000)
    grown = _rss_mib() - rss_before
    del holder
    gc.collect()
    return median(times), grown


def _encode(route: object) -> bytes:
    return b"route"


def _rss_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def s13_big_table(p: Profile) -> Result:
    """GC pauses, loop lag, RSS per topic and lookups with 200,000 topics x 4 broker names loaded."""
    brokers, topics = p.pick((1_000, 200_000), (100, 20_000), (10, 500))
    per_topic = 4
    seconds = p.pick(8, 2, 1)
    churn_per_second = p.pick(20, 10, 5)
    processes, concurrency = 2, 16
    assignment = _broker_topics(brokers, topics, per_topic)
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        time.sleep(1.0)
        idle_rss = server.rss_bytes()
        started, before_load = time.perf_counter(), Pauses.read(server.metrics_url)
        with ThreadPoolExecutor(4) as pool:  # four brokers register at a time
            list(pool.map(lambda b: stub.RegisterBroker(
                register_request(f"broker-{b}", _addr(b), _configs(assignment[b])), timeout=120
            ), range(brokers)))  # fmt: skip
        load_seconds = time.perf_counter() - started
        load_pauses = Pauses.read(server.metrics_url).since(before_load)
        if _gauge(server, "namesrv_queue_datas") != topics * per_topic:
            raise BenchError(f"{_gauge(server, 'namesrv_queue_datas'):.0f} QueueData, expected {topics * per_topic}")
        rng = random.Random(12)
        lookups = [_lookup(f"topic-{rng.randrange(topics)}") for _ in range(40_000)]

        def run() -> LoadRun:
            return grpc_load(
                server.address, PICKUP_TOPIC_ROUTE, lookups, server_pid=server.pid, processes=processes,
                concurrency=concurrency, seconds=seconds, expect_brokers=per_topic,
            )  # fmt: skip

        quiet: list[LoadRun] = []
        churned: list[LoadRun] = []
        pauses: list[PauseFigures] = []
        registrations: list[float] = []
        rss: list[float] = []
        churn = Churn(stub, assignment, churn_per_second)
        for _ in range(p.repeats):
            quiet.append(run())
            before = Pauses.read(server.metrics_url)
            count = churn.count
            with churn.running():
                churned.append(run())
            pauses.append(Pauses.read(server.metrics_url).since(before))
            registrations.append(float(churn.count - count))
            rss.append(server.rss_bytes() / 2**20)
        loaded_rss = server.rss_bytes()
    per_topic_bytes = [(r * 2**20 - idle_rss) / topics for r in rss]
    layouts: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(p.repeats):  # alternating, so drift of a noisy machine hits both alike
        for old_layout in (True, False):
            layouts[old_layout].append(full_collection_ms(brokers, topics, per_topic, old_layout=old_layout))
    table = (
        f"{brokers:,} brokers, {topics:,} topics on {per_topic} broker names each ({topics * per_topic:,} QueueData)"
    )
    client = f"{processes} grpc.aio client processes x {concurrency} calls in flight, {seconds} s per run"
    quiet_p99, p99 = [r.p99_ms for r in quiet], [r.p99_ms for r in churned]
    max_ms = [r.max_ms for r in churned]
    churn_what = (
        f"{churn_per_second} re-registrations a second of random brokers ({topics * per_topic // brokers:,} topics "
        "each, new DataVersion, 1 % of them changed)"
    )
    return {
        "title": f"a NameServer holding {table} (loaded in {load_seconds:.0f} s)",
        "rows": [
            row(
                "13a",
                f"garbage-collection pauses of the NameServer holding {table}, while lookups of random topics run and "
                f"{churn_what} ({client})",
                f"every collection of the run ({median([f.collections for f in pauses]):,.0f} per run, median)",
                pause_metrics(pauses),
                baseline=f"the load itself ({brokers:,} registrations, 4 at a time), measured once: "
                f"{load_pauses.collections:,.0f} collections, longest in ({load_pauses.longest_gc_ms[0]:g}, "
                f"{load_pauses.longest_gc_ms[1]:g}] ms, {load_pauses.gc_over_20ms:.0f} over 20 ms",
                target="no garbage-collection pause over 20 ms in any run",
                met=max(f.gc_over_20ms for f in pauses) == 0,
            ),
            row(
                "13b",
                f"RSS of the NameServer holding {table}, after each run (route cache filled by the lookups)",
                "one reading per run",
                {
                    "RSS MiB": rss,
                    "bytes per topic over idle": per_topic_bytes,
                    "bytes per QueueData over idle": [b / per_topic for b in per_topic_bytes],
                },
                baseline=f"the same process idle, before the load: {idle_rss / 2**20:.1f} MiB",
                target="reported: sizes the memory request and limit of deploy/kubernetes/namesrv.yaml",
                met=None,
            ),
            row(
                "13c",
                f"PickupTopicRoute of random topics of {table} while {churn_what}; {client}",
                f"{median([r.requests for r in churned]):,.0f} lookups and {median(registrations):.0f} registrations "
                "per run (median)",
                {"p99 ms": p99, "max ms": max_ms, "lookups/s": [r.rps for r in churned]},
                baseline="the same lookups with no registration running (same client, same server, run just before)",
                baseline_metrics={
                    "p99 ms": quiet_p99,
                    "max ms": [r.max_ms for r in quiet],
                    "lookups/s": [r.rps for r in quiet],
                },
                target=LOOKUP_TAIL_TARGET,
                met=tail_met(p99, quiet_p99, max_ms),
            ),
            row(
                "13d",
                f"one full garbage collection (gc.collect()) in a bench process holding a RouteInfoManager with "
                f"{table} and every route cached (the table as stored since issue 21: shared plain tuples, dicts "
                "the collector does not track)",
                "median of 5 collections per run",
                {
                    "full collection ms": [ms for ms, _ in layouts[False]],
                    "table MiB": [mib for _, mib in layouts[False]],
                },
                baseline="the same contents in the layout before issue 21 (a QueueData NamedTuple per entry in dicts "
                "of dicts, the topic index as sets, cached routes as dicts), built and collected in the same runs, "
                "alternately",
                baseline_metrics={
                    "full collection ms": [ms for ms, _ in layouts[True]],
                    "table MiB": [mib for _, mib in layouts[True]],
                },
                target="reported: what the layout change bought",
                met=None,
            ),
        ],
        "raw": {
            "brokers": brokers,
            "topics": topics,
            "queue_datas": topics * per_topic,
            "load_seconds": round(load_seconds, 1),
            "load_pauses": load_pauses.__dict__,
            "idle_rss_bytes": idle_rss,
            "loaded_rss_bytes": loaded_rss,
            "pauses": [f.__dict__ for f in pauses],
            "quiet": [r.as_dict() for r in quiet],
            "churned": [r.as_dict() for r in churned],
        },
    }


def _register_at_once(
    stub: Any, request: ns_pb2.RegisterBrokerRequest, barrier: threading.Barrier, durations: list[float]
) -> None:
    barrier.wait()
    start = time.perf_counter()
    stub.RegisterBroker(request, timeout=120)
    durations.append((time.perf_counter() - start) * 1000)


def _append_result(result: list[LoadRun], run: Callable[[], LoadRun]) -> None:
    result.append(run())


def s14_cluster_restart(p: Profile) -> Result:
    """Ten brokers of 20,000 topics register at the same moment while lookups of another broker's
    topics run; every registration must land."""
    brokers, topics = p.pick((10, 20_000), (10, 5_000), (3, 300))
    resident_topics = p.pick(20_000, 5_000, 300)
    seconds = p.pick(8, 3, 2)
    processes, concurrency = 2, 16
    requests = [
        register_request(f"restart-{b}", f"10.5.0.{b}:10911", _configs([f"restart-{b}-{i}" for i in range(topics)]))
        for b in range(brokers)
    ]
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        resident = [f"resident-{i}" for i in range(resident_topics)]
        stub.RegisterBroker(register_request("resident", "10.5.1.1:10911", _configs(resident)), timeout=120)
        rng = random.Random(13)
        lookups = [_lookup(rng.choice(resident)) for _ in range(20_000)]

        def run() -> LoadRun:
            return grpc_load(
                server.address, PICKUP_TOPIC_ROUTE, lookups, server_pid=server.pid, processes=processes,
                concurrency=concurrency, seconds=seconds, expect_brokers=1,
            )  # fmt: skip

        quiet: list[LoadRun] = []
        restarts: list[LoadRun] = []
        pauses: list[PauseFigures] = []
        slowest: list[float] = []
        landed = True
        for _ in range(p.repeats):
            quiet.append(run())
            barrier = threading.Barrier(brokers + 1)
            durations: list[float] = []
            before = Pauses.read(server.metrics_url)
            with ThreadPoolExecutor(brokers) as pool:
                futures = [pool.submit(_register_at_once, stub, request, barrier, durations) for request in requests]
                result: list[LoadRun] = []
                lookups_thread = threading.Thread(target=_append_result, args=(result, run))
                lookups_thread.start()
                time.sleep(min(1.0, seconds / 4))
                barrier.wait()  # all registrations leave at once
                for future in futures:
                    future.result()
                lookups_thread.join()
            restarts.append(result[0])
            pauses.append(Pauses.read(server.metrics_url).since(before))
            slowest.append(max(durations))
            landed = landed and _gauge(server, "namesrv_topics") == resident_topics + brokers * topics
            for b in range(brokers):  # gone again, so the next run registers them anew
                stub.UnregisterBroker(
                    ns_pb2.UnregisterBrokerRequest(
                        cluster_name="BenchCluster",
                        broker_name=f"restart-{b}",
                        broker_id=0,
                        broker_addr=f"10.5.0.{b}:10911",
                    ),
                    timeout=60,
                )
            landed = landed and _gauge(server, "namesrv_topics") == resident_topics
    quiet_p99, p99 = [r.p99_ms for r in quiet], [r.p99_ms for r in restarts]
    max_ms = [r.max_ms for r in restarts]
    client = f"{processes} grpc.aio client processes x {concurrency} calls in flight, {seconds} s per run"
    return {
        "title": f"{brokers} brokers of {topics:,} topics registering at the same moment (a cluster restart)",
        "rows": [
            row(
                "14a",
                f"PickupTopicRoute of random topics of a resident broker ({resident_topics:,} topics) while {brokers} "
                f"brokers of {topics:,} topics each ({len(requests[0].body) / 2**20:.1f} MiB bodies) send their first "
                f"RegisterBroker at the same moment, one thread each; {client}",
                f"{median([r.requests for r in restarts]):,.0f} lookups and {brokers} registrations per run (median)",
                {
                    "p99 ms": p99,
                    "max ms": max_ms,
                    "lookups/s": [r.rps for r in restarts],
                    "slowest registration ms": slowest,
                    **pause_metrics(pauses),
                },
                baseline="the same lookups with no registration running (same client, same server, run just before)",
                baseline_metrics={
                    "p99 ms": quiet_p99,
                    "max ms": [r.max_ms for r in quiet],
                    "lookups/s": [r.rps for r in quiet],
                },
                target=f"{LOOKUP_TAIL_TARGET}; all {brokers * topics:,} topics registered in every run",
                met=tail_met(p99, quiet_p99, max_ms) and landed,
            )
        ],
        "notes": [CLUSTER_RESTART_BEFORE],
        "raw": {
            "quiet": [r.as_dict() for r in quiet],
            "restarts": [r.as_dict() for r in restarts],
            "pauses": [f.__dict__ for f in pauses],
            "landed": landed,
        },
    }


CLUSTER_RESTART_BEFORE = """What each change bought for row 14a, measured on the same box with \
`python -m bench.run --only 14`, two versions at a time run alternately (two rounds each, so both saw \
the same load; each figure is the 3-run median of one round; 2026-11-26, 13:09 and 13:15 UTC, load \
average 1.5-3):

| comparison | version | p99 ms | quiet p99 ms | max ms |
|---|---|---|---|---|
| 1 | before: a master's topics compared one by one in a worker thread, then written under the \
lock in one go | 40.6, 50.4 | 12.7, 13.5 | 77, 90 |
| 1 | the comparison in slices of 512 topics with the event loop's turn awaited between slices \
(`LoopPacer`), topics no broker name holds prepared in bulk, the writes in bulk dict operations \
| 31.6, 33.4 | 14.9, 14.5 | 50, 57 |
| 2 | the same | 40.6, 36.0 | 21.0, 14.3 | 76, 77 |
| 2 | and the writes in slices of 512 with the GIL let go for 0.1 ms between them \
(`LoopPacer.release_gil`) | 28.9, 30.4 | 15.2, 15.4 | 66, 49 |

In the server, each 20,000-topic registration held the GIL for ~40 ms of Python in stretches of up to \
5 ms (the interpreter's switch interval), and lookups queued 40-65 ms behind the end of each one. \
Since issue 29 that machinery (`LoopPacer`, slices, the body-decoding child) is gone: registrations \
are applied by the route-table process, and lookups are answered by the serving processes, which \
only apply each registration's change (a few bulk dict operations) between two requests; the rows \
above measure that."""
