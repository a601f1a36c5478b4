"""Scenario J3, the size an SRE asked about (issue 38): 5,000 brokers heartbeating every 30 s over
200,000 topics on 4 broker names each, lookups on both doors, with the Java NameServer (5.5.0,
``bin/runserver.sh`` JVM flags) in the same run.

The cluster: 2,500 broker names, each a master (brokerId 0) and a slave (brokerId 1): 5,000 brokers.
The names form groups of four that carry the same topics (topic ``t`` on the four names of group
``t mod 625``), so every topic has 4 broker names and 8 brokers in its route, and every broker
registers 320 topics (8 read/8 write queues, perm 6) in a plain JSON body as a Java broker sends it.
A RocketMQ 5.x broker sends its whole REGISTER_BROKER every 30 s (``registerBrokerAll`` with
``forceRegister=true``, the default), unchanged between two: 5,000 / 30 = 167 registrations a second.

Per peer, in alternating windows (so drift of a shared machine hits both alike): the registrations
run at that rate over 8 connections that stay open all along (both NameServers drop a broker when
the connection it registered over closes), and after a warm-up lookups of random topics run over
remoting (both) and gRPC ``PickupTopicRoute`` (ours; Java has no gRPC door). Reported: lookups p99
and per second, the registrations' p99 and the rate actually reached, the busy share of the process
that applies them (ours: the route-table process; Java: the whole JVM, which also answers the
lookups), and the memory after the first registration of every broker (PSS over our processes,
the JVM's PSS).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import BenchError, LoadRun, Profile, Result, cpu_seconds, median, percentile, row, tree_pids
from bench.java_peer import JAVA_HEAP_MB, Peer, _rss_samples, both
from bench.remoting_load import remoting_load
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.client.remoting import RemotingClient, RemotingConnectionError
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire.bodies import encode_register_broker_body

HEARTBEAT_SECONDS = 30.0
"""A RocketMQ broker's registration period (``registerNameServerPeriod``, 30 s)."""
NAMES_PER_TOPIC = 4
CONNECTIONS = 8
"""Connections the fleet registers over (each broker always over the same one)."""
MAX_IN_FLIGHT = 512
"""Registrations sent and not yet answered, at most: a server slower than the rate falls behind
(reported as the rate reached) instead of the load generator piling up requests without end."""


def fleet(names: int, topics: int) -> list[tuple[dict[str, str], bytes]]:
    """REGISTER_BROKER requests of ``names`` broker names ``scale-NNNN`` x (master, slave) of cluster
    ScaleCluster; the names form groups of :data:`NAMES_PER_TOPIC` and topic ``scale-topic-T`` is on
    the names of group ``T mod groups``. Raises ValueError unless ``names`` is a multiple of 4."""
    if names % NAMES_PER_TOPIC:
        raise ValueError(f"names must be a multiple of {NAMES_PER_TOPIC}, not {names}")
    groups = names // NAMES_PER_TOPIC
    bodies = []
    for group in range(groups):
        configs = {f"scale-topic-{t}": TopicConfig(f"scale-topic-{t}", 8, 8) for t in range(group, topics, groups)}
        bodies.append(encode_register_broker_body(configs, DataVersion(0, 1_700_000_000_000, 1), compressed=False))
    requests = []
    for name in range(names):
        body = bodies[name // NAMES_PER_TOPIC]
        for broker_id in (0, 1):
            addr = f"127.0.{name // 200}.{name % 200 + 1}:{10911 + 10 * broker_id}"
            header = {
                "clusterName": "ScaleCluster", "brokerName": f"scale-{name:04d}", "brokerId": str(broker_id),
                "brokerAddr": addr, "haServerAddr": addr, "heartbeatTimeoutMillis": "600000",
                "enableActingMaster": "false", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
            }  # fmt: skip
            requests.append((header, body))
    return requests


class Fleet:
    """The brokers of :func:`fleet` over :data:`CONNECTIONS` connections to one NameServer, kept open
    (a thread runs their event loop); broker ``i`` always registers over connection ``i mod 8``."""

    def __init__(self, addr: str, requests: Sequence[tuple[dict[str, str], bytes]]) -> None:
        self.requests = requests
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        host, port = addr.rsplit(":", 1)
        self._clients: list[RemotingClient] = [
            self._run(RemotingClient.connect(host, int(port), timeout=30)) for _ in range(CONNECTIONS)
        ]

    def _run(self, coro: Any, timeout: float = 3600) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _register(self, index: int) -> float:
        header, body = self.requests[index]
        started = time.perf_counter()
        answer = await self._clients[index % CONNECTIONS].request(RequestCode.REGISTER_BROKER, header, body, timeout=60)
        if answer.code != ResponseCode.SUCCESS:
            raise BenchError(f"REGISTER_BROKER of {header['brokerName']} refused: {answer.code} {answer.remark}")
        return (time.perf_counter() - started) * 1000

    def register_all(self) -> float:
        """Every broker once, up to :data:`MAX_IN_FLIGHT` at a time; the seconds it took."""

        async def all_of() -> None:
            limit = asyncio.Semaphore(MAX_IN_FLIGHT)

            async def one(index: int) -> None:
                async with limit:
                    await self._register(index)

            await asyncio.gather(*(one(i) for i in range(len(self.requests))))

        started = time.perf_counter()
        self._run(all_of())
        return time.perf_counter() - started

    @contextmanager
    def heartbeating(self, rate: float) -> Iterator[list[float]]:
        """Registrations at ``rate`` a second, round-robin over the brokers (each the same request
        as before: an unchanged DataVersion), while inside; yields the list of their durations (ms),
        complete on exit. Raises BenchError on a refused or failed registration."""
        durations: list[float] = []
        stop = threading.Event()

        async def paced() -> None:
            limit = asyncio.Semaphore(MAX_IN_FLIGHT)
            tasks: set[asyncio.Task[None]] = set()
            started, sent = time.perf_counter(), 0

            async def one(index: int) -> None:
                try:
                    durations.append(await self._register(index))
                finally:
                    limit.release()

            while not stop.is_set():
                due = started + sent / rate
                if (wait := due - time.perf_counter()) > 0:
                    await asyncio.sleep(min(wait, 0.05))
                    continue
                await limit.acquire()
                task = asyncio.create_task(one(sent % len(self.requests)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
            if tasks:
                await asyncio.gather(*tasks)

        future = asyncio.run_coroutine_threadsafe(paced(), self._loop)
        try:
            yield durations
        finally:
            stop.set()
            try:
                future.result(300)
            except RemotingConnectionError as error:
                raise BenchError(f"a registration failed: {error}") from None

    def close(self) -> None:
        for client in self._clients:
            self._run(client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


def route_table_pid(peer: Peer) -> int:
    """The pid of our route-table process (the process that applies registrations); the JVM's own
    pid for Java."""
    for pid in tree_pids(peer.pid)[1:]:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"namesrv: route-table process"):
                return pid
        except OSError:
            continue
    return peer.pid


def j3_scale(p: Profile) -> Result:
    """5,000 brokers heartbeating every 30 s over 200,000 topics x 4 broker names, both NameServers."""
    names, topics = p.pick((2_500, 200_000), (252, 20_000), (4, 40))
    seconds, warm_up = p.pick(10.0, 3.0, 0.3), p.pick(5.0, 2.0, 0.1)
    requests = fleet(names, topics)
    rate = p.pick(len(requests) / HEARTBEAT_SECONDS, len(requests) / HEARTBEAT_SECONDS, 8.0)
    rng = random.Random(38)
    lookups = [f"scale-topic-{rng.randrange(topics)}" for _ in range(20_000)]
    pickups = [ns_pb2.PickupTopicRouteRequest(topic=t).SerializeToString() for t in lookups[:5_000]]
    from bench.grpc_load import grpc_load

    with both() as (java, ours):
        peers = (java, ours)
        fleets = {peer.name: Fleet(peer.addr, requests) for peer in peers}
        try:
            first_s = {peer.name: fleets[peer.name].register_all() for peer in peers}
            time.sleep(2)
            memory = {peer.name: [sample / 2**20 for sample in _rss_samples(peer)] for peer in peers}
            remoting: dict[str, list[LoadRun]] = {peer.name: [] for peer in peers}
            grpc_runs: list[LoadRun] = []
            beats: dict[str, list[dict[str, float]]] = {peer.name: [] for peer in peers}
            for _ in range(p.repeats):
                for peer in peers:
                    applier = route_table_pid(peer)
                    with fleets[peer.name].heartbeating(rate) as durations:
                        time.sleep(warm_up)
                        cpu0, wall0, sent0 = cpu_seconds(applier), time.perf_counter(), len(durations)
                        remoting[peer.name].append(
                            remoting_load(
                                "latency", peer.addr, lookups, server_pid=peer.pid, metrics_url=peer.metrics_url,
                                seconds=seconds, processes=2, concurrency=8,
                            )
                        )  # fmt: skip
                        if peer is ours:
                            grpc_runs.append(
                                grpc_load(
                                    str(ours.grpc_addr), "/namesrv.v1.NameServerService/PickupTopicRoute",
                                    pickups, server_pid=peer.pid, processes=2, concurrency=8, seconds=seconds,
                                )
                            )  # fmt: skip
                        wall = time.perf_counter() - wall0
                        busy = (cpu_seconds(applier) - cpu0) / wall
                        answered = len(durations) - sent0
                    if not durations:
                        raise BenchError(f"{peer.name}: no registration answered during the lookups")
                    ordered = sorted(durations)
                    beats[peer.name].append(
                        {
                            "rate": answered / wall,
                            "p50": statistics.median(ordered),
                            "p99": percentile(ordered, 99),
                            "busy": busy,
                        }
                    )
        finally:
            for one in fleets.values():
                one.close()
    j, o = java.name, ours.name
    what = (
        f"{len(requests):,} brokers ({names:,} broker names x master + slave) re-registering at {rate:.0f}/s "
        f"(each every {len(requests) / rate:.0f} s, unchanged) over {topics:,} topics on {NAMES_PER_TOPIC} "
        f"broker names each ({len(requests) // 2 * (topics // (names // NAMES_PER_TOPIC)):,} QueueData per "
        "role; 8 brokers in every route)"
    )
    java_flags = f"runserver.sh JVM flags, -Xmx{JAVA_HEAP_MB}m"

    def lookup_metrics(runs: list[LoadRun], peer: str) -> dict[str, list[float]]:
        return {
            "p99 ms": [r.p99_ms for r in runs],
            "lookups/s": [r.rps for r in runs],
            "registrations/s reached": [b["rate"] for b in beats[peer]],
            "registration p99 ms": [b["p99"] for b in beats[peer]],
        }

    ratio = median([r.rps for r in remoting[o]]) / max(1e-9, median([r.rps for r in remoting[j]]))
    p99_ratio = median([r.p99_ms for r in remoting[o]]) / max(1e-9, median([r.p99_ms for r in remoting[j]]))
    rows = [
        row(
            "J3a", f"remoting lookups of random topics (2 processes x 8 connections, one in flight each) while {what}",
            f"{seconds:.0f} s per run after {warm_up:.0f} s of registrations",
            lookup_metrics(remoting[o], o), baseline=f"the {j} NameServer, same load, alternating runs ({java_flags})",
            baseline_metrics=lookup_metrics(remoting[j], j), target="", met=None,
            note=f"ours / Java: lookups/s {ratio:.2f}x, p99 {p99_ratio:.2f}x",
        ),
        row(
            "J3b", f"gRPC PickupTopicRoute of random topics (2 processes x 8 in flight) while {what}",
            f"{seconds:.0f} s per run, right after J3a's",
            {"p99 ms": [r.p99_ms for r in grpc_runs], "lookups/s": [r.rps for r in grpc_runs]},
            baseline="none: the Java NameServer has no gRPC door", target="", met=None,
        ),
        row(
            "J3c", f"the registrations of J3a: {rate:.0f}/s asked",
            "the J3a window of each run",
            {"registrations/s reached": [b["rate"] for b in beats[o]],
             "registration p50 ms": [b["p50"] for b in beats[o]],
             "registration p99 ms": [b["p99"] for b in beats[o]],
             "route-table process busy share": [b["busy"] for b in beats[o]]},
            baseline=f"the {j} NameServer (busy share: the whole JVM, lookups included)",
            baseline_metrics={"registrations/s reached": [b["rate"] for b in beats[j]],
                              "registration p50 ms": [b["p50"] for b in beats[j]],
                              "registration p99 ms": [b["p99"] for b in beats[j]],
                              "JVM busy share": [b["busy"] for b in beats[j]]},
            target="", met=None,
        ),
        row(
            "J3d", f"memory with every broker registered once ({len(requests):,} registrations, {MAX_IN_FLIGHT} in "
            f"flight over {CONNECTIONS} connections)", "3 samples 0.5 s apart, 2 s after the last registration",
            {"PSS MiB": memory[o]}, baseline=f"the {j} NameServer ({java_flags})",
            baseline_metrics={"PSS MiB": memory[j]}, target="", met=None,
            note=f"the first registration of every broker took {first_s[o]:.1f} s (Java: {first_s[j]:.1f} s)",
        ),
    ]  # fmt: skip
    return {
        "title": f"{len(requests):,} brokers every {len(requests) / rate:.0f} s over {topics:,} topics x "
        f"{NAMES_PER_TOPIC} broker names: ours and the {j} NameServer",
        "rows": rows,
        "raw": {
            "beats": beats, "memory_mib": memory, "first_registration_s": first_s,
            "remoting": {name: [r.as_dict() for r in runs] for name, runs in remoting.items()},
            "grpc": [r.as_dict() for r in grpc_runs],
        },
    }  # fmt: skip
