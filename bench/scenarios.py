"""The eight benchmark scenarios. Each returns a dict of measured values plus ``target`` and ``met``.

Lookup figures are ratios to an RPC that does nothing (the gRPC health check) measured in the same
run, against the same server process and with the same client: the physical limit of our stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import urllib.request
from typing import Any

import grpc
from grpc_health.v1 import health_pb2
from prometheus_client.parser import text_string_to_metric_families

from bench.harness import (
    HEALTH_CHECK,
    PICKUP_TOPIC_ROUTE,
    ROOT,
    LoadResult,
    free_port,
    h2load,
    median,
    namesrv,
    register_request,
    timed_calls,
    topic_configs,
)
from broker_agent.agent import BrokerAgent
from broker_agent.config import load_broker_config
from broker_agent.topics import TopicSource
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.body import crc32c
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager

Result = dict[str, Any]


def _lookup_vs_empty(address: str, topic: str, seconds: float) -> tuple[LoadResult, LoadResult]:
    """h2load of PickupTopicRoute(topic) and of the empty health check, interleaved
    (empty, lookup, empty, lookup) and averaged, so drift of a noisy machine hits both alike."""
    empties, lookups = [], []
    for _ in range(2):
        empties.append(h2load(address, HEALTH_CHECK, health_pb2.HealthCheckRequest(), seconds=seconds / 2))
        lookups.append(
            h2load(address, PICKUP_TOPIC_ROUTE, ns_pb2.PickupTopicRouteRequest(topic=topic), seconds=seconds / 2)
        )
    return _mean(empties), _mean(lookups)


def _mean(results: list[LoadResult]) -> LoadResult:
    n = len(results)
    return LoadResult(
        requests=sum(r.requests for r in results),
        failed=sum(r.failed for r in results),
        rps=sum(r.rps for r in results) / n,
        p50_ms=sum(r.p50_ms for r in results) / n,
        p99_ms=sum(r.p99_ms for r in results) / n,
        max_ms=max(r.max_ms for r in results),
    )


def _check_route(address_channel: Any, topic: str, brokers: int) -> None:
    route = (
        ns_grpc.NameServerServiceStub(address_channel)
        .PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=10)
        .route
    )
    assert len(route.queue_datas) == brokers, f"{topic} has {len(route.queue_datas)} brokers, expected {brokers}"


def s1_small_route(quick: bool) -> Result:
    """PickupTopicRoute of a topic on one broker name (master + slave), 64 concurrent calls."""
    seconds = 4 if quick else 20
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        topics = topic_configs(["TopicTest"], 4)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10911", topics), timeout=10)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10921", topics, broker_id=1), timeout=10)
        _check_route(channel, "TopicTest", 1)
        empty, lookup = _lookup_vs_empty(server.address, "TopicTest", seconds)
    throughput, p99 = lookup.rps / empty.rps, lookup.p99_ms / empty.p99_ms
    return {
        "empty_call": empty.as_dict(),
        "lookup": lookup.as_dict(),
        "throughput_ratio": round(throughput, 3),
        "p99_ratio": round(p99, 3),
        "target": "throughput >= 0.9 x empty call; p99 <= 1.5 x empty call's p99",
        "met": throughput >= 0.9 and p99 <= 1.5,
    }


def load_cluster(stub: Any, brokers: int, topics: int, per_topic: int) -> None:
    """Register ``brokers`` masters; topic t lives on broker names (t * per_topic + k) % brokers."""
    assignment: list[list[str]] = [[] for _ in range(brokers)]
    for t in range(topics):
        for k in range(per_topic):
            assignment[(t * per_topic + k) % brokers].append(f"topic-{t}")
    for b, names in enumerate(assignment):
        request = register_request(f"broker-{b}", f"10.1.{b // 250}.{b % 250}:10911", topic_configs(names))
        stub.RegisterBroker(request, timeout=120)


def s2_large_cluster(quick: bool) -> Result:
    """The same lookup with 1,000 brokers and 100,000 topics (each on 8 broker names) loaded."""
    brokers, topics = (200, 10_000) if quick else (1_000, 100_000)
    seconds = 4 if quick else 20
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        started = time.perf_counter()
        load_cluster(stub, brokers, topics, 8)
        load_seconds = time.perf_counter() - started
        _check_route(channel, "topic-4242", 8)
        rss = server.rss_bytes()
        empty, lookup = _lookup_vs_empty(server.address, "topic-4242", seconds)
    throughput = lookup.rps / empty.rps
    return {
        "brokers": brokers,
        "topics": topics,
        "queue_datas": topics * 8,
        "load_seconds": round(load_seconds, 1),
        "rss_mib": round(rss / 2**20, 1),
        "empty_call": empty.as_dict(),
        "lookup": lookup.as_dict(),
        "throughput_ratio": round(throughput, 3),
        "target": "throughput >= 0.85 x empty call; RSS <= 1 GiB",
        "met": throughput >= 0.85 and rss <= 2**30,
    }


def s3_lookups_during_registrations(quick: bool) -> Result:
    """Lookups (64 concurrent) while a broker with 100,000 topics registers a changed DataVersion
    every second."""
    topics = 20_000 if quick else 100_000
    seconds = 6 if quick else 20
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        stub.RegisterBroker(register_request("broker-a", "127.0.0.1:10911", topic_configs(["TopicTest"])), timeout=10)
        big = topic_configs([f"big-{i}" for i in range(topics)])
        bodies = [register_request("big", "127.0.0.1:20911", big, version=DataVersion(0, 1, n)) for n in range(40)]
        stub.RegisterBroker(bodies[0], timeout=120)
        durations: list[float] = []
        stop = threading.Event()

        def register_every_second() -> None:
            n = 1
            while not stop.is_set():
                start = time.perf_counter()
                stub.RegisterBroker(bodies[n % len(bodies)], timeout=120)
                durations.append(time.perf_counter() - start)
                n += 1
                stop.wait(max(0.0, 1.0 - (time.perf_counter() - start)))

        registerer = threading.Thread(target=register_every_second)
        registerer.start()
        try:
            small = h2load(
                server.address,
                PICKUP_TOPIC_ROUTE,
                ns_pb2.PickupTopicRouteRequest(topic="TopicTest"),
                seconds=seconds / 2,
            )
            on_big = h2load(
                server.address, PICKUP_TOPIC_ROUTE, ns_pb2.PickupTopicRouteRequest(topic="big-77"), seconds=seconds / 2
            )
        finally:
            stop.set()
            registerer.join()
    p99 = max(small.p99_ms, on_big.p99_ms)
    return {
        "big_broker_topics": topics,
        "registrations": len(durations),
        "registration_ms_median": round(median(durations) * 1000, 1) if durations else None,
        "lookup_other_topic": small.as_dict(),
        "lookup_topic_of_registering_broker": on_big.as_dict(),
        "lookup_p99_ms": round(p99, 2),
        "target": "lookup p99 <= 50 ms",
        "met": p99 <= 50 and len(durations) >= 2,
    }


def s4_register_sizes(quick: bool) -> Result:
    """One RegisterBroker (first registration) with 100 / 10,000 / 100,000 topics."""
    sizes = (100, 10_000, 50_000) if quick else (100, 10_000, 100_000)
    runs = 3
    out: Result = {}
    with namesrv() as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        for size in sizes:
            configs = topic_configs([f"t{size}-{i}" for i in range(size)])
            latencies = []
            for run in range(runs):
                request = register_request(f"b{size}-{run}", f"10.2.{run}.1:{10000 + size % 50000}", configs)
                start = time.perf_counter()
                stub.RegisterBroker(request, timeout=120)
                latencies.append((time.perf_counter() - start) * 1000)
            out[f"topics_{size}"] = {
                "body_bytes": len(request.body),
                "latency_ms_median": round(median(latencies), 1),
            }
    out["target"] = f"{sizes[-1]:,} topics succeed (Java NameServer fails past ~60-70k: 16 MiB frame limit)"
    out["met"] = True
    return out


def s5_unchanged_broker(quick: bool) -> Result:
    """QueryDataVersion and heartbeat of a 100,000-topic broker vs a 10-topic one, and the split of
    an unchanged full re-registration into transfer + checksum vs the rest."""
    big_topics = 20_000 if quick else 100_000
    calls = 200 if quick else 1000
    metrics_port = free_port()
    with namesrv("--metrics-port", str(metrics_port)) as server, server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        big = register_request("big", "127.0.0.1:20911", topic_configs([f"big-{i}" for i in range(big_topics)]))
        small = register_request("small", "127.0.0.1:30911", topic_configs([f"small-{i}" for i in range(10)]))
        stub.RegisterBroker(big, timeout=120)
        stub.RegisterBroker(small, timeout=120)
        result: Result = {}
        for label, request in (("big", big), ("small", small)):
            ident = {k: getattr(request, k) for k in ("cluster_name", "broker_name", "broker_id", "broker_addr")}
            qdv = ns_pb2.QueryDataVersionRequest(**ident, data_version=ns_pb2.QueryDataVersionRequest().data_version)
            qdv.data_version.timestamp, qdv.data_version.counter = 1, 1
            beat = ns_pb2.BrokerHeartbeatRequest(**ident)
            timed_calls(stub.QueryDataVersion, qdv, 50)  # warm-up
            result[f"query_data_version_ms_{label}"] = round(median(timed_calls(stub.QueryDataVersion, qdv, calls)), 3)
            result[f"heartbeat_ms_{label}"] = round(median(timed_calls(stub.BrokerHeartbeat, beat, calls)), 3)
        runs = 10 if quick else 40
        wrong_crc = ns_pb2.RegisterBrokerRequest()
        wrong_crc.CopyFrom(big)
        wrong_crc.body_crc32c ^= 1
        reregistrations, transfer_and_checksum = [], []
        before = registration_seconds(metrics_port)
        for _ in range(runs):  # interleaved, so drift on a noisy machine hits both alike
            reregistrations.extend(timed_calls(stub.RegisterBroker, big, 1))
            start = time.perf_counter()
            with contextlib.suppress(grpc.RpcError):  # DATA_LOSS, as wanted: checksum checked, nothing else
                stub.RegisterBroker(wrong_crc, timeout=60)
            transfer_and_checksum.append((time.perf_counter() - start) * 1000)
        after = registration_seconds(metrics_port)
        # The server's own RegisterBroker processing time (namesrv_registration_duration_seconds),
        # over the re-registrations and the rejected calls alike: checksum and table lookups only.
        processing_ms = (after[0] - before[0]) / (after[1] - before[1]) * 1000
        reregister = median(reregistrations)
        start = time.perf_counter()
        for _ in range(20):
            crc32c(big.body)
        crc_ms = (time.perf_counter() - start) / 20 * 1000
    qdv_ratio = result["query_data_version_ms_big"] / result["query_data_version_ms_small"]
    beat_ratio = result["heartbeat_ms_big"] / result["heartbeat_ms_small"]
    result.update(
        {
            "big_broker_topics": big_topics,
            "body_bytes": len(big.body),
            "query_data_version_ratio": round(qdv_ratio, 3),
            "heartbeat_ratio": round(beat_ratio, 3),
            "unchanged_reregistration_ms": round(reregister, 2),
            "transfer_plus_checksum_ms": round(median(transfer_and_checksum), 2),
            "unchanged_reregistration_ms_min": round(min(reregistrations), 2),
            "transfer_plus_checksum_ms_min": round(min(transfer_and_checksum), 2),
            "crc32c_of_body_ms": round(crc_ms, 3),
            "server_processing_ms_mean": round(processing_ms, 3),
            "target": "QueryDataVersion and heartbeat <= 1.2 x the 10-topic broker's; re-registration = transfer "
            "+ checksum (no decode, no table work)",
            # No decode, no table work: the server's processing is the checksum plus lookups.
            "met": qdv_ratio <= 1.2 and beat_ratio <= 1.2 and processing_ms <= crc_ms + 1.0,
        }
    )
    return result


def registration_seconds(metrics_port: int) -> tuple[float, float]:
    """(sum, count) of ``namesrv_registration_duration_seconds`` scraped from the server."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "namesrv_registration_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    total = sample.value
                elif sample.name.endswith("_count"):
                    count = sample.value
    return total, count


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def s6_expiry_scan(quick: bool) -> Result:
    """Expiry scan of a table with 10,000 brokers, 1,000 of them expired (in process: the scan is
    pure table work)."""
    clock = _Clock()
    table = RouteInfoManager(clock)
    for b in range(10_000):
        timeout = 10_000 if b % 10 == 0 else 120_000
        table.register_broker(
            cluster_name="c", broker_name=f"b{b}", broker_id=0, broker_addr=f"10.3.{b // 250}.{b % 250}:10911",
            heartbeat_timeout_millis=timeout, topic_configs={f"t{b}": TopicConfig(f"t{b}", 4, 4)},
        )  # fmt: skip
    scans = 1000 if quick else 10_000
    start = time.perf_counter()
    for _ in range(scans):
        assert table.scan_not_active_broker() == []
    idle_ms = (time.perf_counter() - start) / scans * 1000
    clock.now += 10_001
    start = time.perf_counter()
    removed = table.scan_not_active_broker()
    removal_ms = (time.perf_counter() - start) * 1000
    correct = sorted(r.broker_name for r in removed) == sorted(f"b{b}" for b in range(0, 10_000, 10))
    correct = correct and len(table.broker_live_table) == 9_000 and len(table.topic_queue_table) == 9_000
    return {
        "brokers": 10_000,
        "expired": len(removed),
        "scan_ms_none_expired": round(idle_ms, 4),
        "scan_ms_1000_expired": round(removal_ms, 2),
        "removals_correct": correct,
        "target": "<= 1 ms per scan with none expired; removals correct",
        "met": idle_ms <= 1 and correct,
    }


def s7_memory(quick: bool) -> Result:
    """RSS of an idle NameServer and of one holding 10 brokers x 100 topics."""
    with namesrv() as server, server.channel() as channel:
        time.sleep(1)
        idle = server.rss_bytes()
        stub = ns_grpc.NameServerServiceStub(channel)
        for b in range(10):
            request = register_request(f"b{b}", f"10.4.0.{b}:10911", topic_configs([f"b{b}-t{i}" for i in range(100)]))
            stub.RegisterBroker(request, timeout=10)
        for i in range(0, 1000, 10):
            stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=f"b{i // 100}-t{i % 100}"), timeout=10)
        loaded = server.rss_bytes()
    return {
        "idle_rss_mib": round(idle / 2**20, 1),
        "loaded_rss_mib": round(loaded / 2**20, 1),
        "target": "RSS <= 60 MB (Rust rewrite 59 MB, Java 354 MB)",
        "met": max(idle, loaded) <= 60 * 10**6,
    }


def s8_agent_black_hole(quick: bool) -> Result:
    """An agent round to 3 NameServers, one of them black-holing traffic (accepts TCP, never answers)."""
    timeout_ms = 2000
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
                    for _ in range(5):
                        start = time.perf_counter()
                        await agent.register_all(force=True)
                        durations.append((time.perf_counter() - start) * 1000)
                finally:
                    await agent.close()
                return durations, per_ns

            _, baseline = asyncio.run(rounds(healthy))
            durations, per_ns = asyncio.run(rounds([healthy[0], black, healthy[1]]))
    finally:
        hole.close()
    normal = median([v for a in healthy for v in baseline[a][1:]])
    with_hole = median([v for a in healthy for v in per_ns[a][1:]])
    return {
        "register_timeout_ms": timeout_ms,
        "healthy_latency_ms_without_black_hole": round(normal, 2),
        "healthy_latency_ms_with_black_hole": round(with_hole, 2),
        "black_hole_call_ms": [round(v) for v in per_ns[black]],
        "round_ms": [round(v) for v in durations],
        "target": "healthy NameServers answered within their normal latency; round ends at the timeout",
        "met": with_hole <= max(2 * normal, normal + 5) and max(durations) <= timeout_ms * 1.1 + 100,
    }


SCENARIOS = {
    "1": ("PickupTopicRoute, topic on 2 brokers, 64 concurrent", s1_small_route),
    "2": ("same with 1,000 brokers x 100,000 topics loaded", s2_large_cluster),
    "3": ("lookups while a 100,000-topic broker registers every second", s3_lookups_during_registrations),
    "4": ("one RegisterBroker with 100 / 10,000 / 100,000 topics", s4_register_sizes),
    "5": ("QueryDataVersion, heartbeat, unchanged re-registration of a 100,000-topic broker", s5_unchanged_broker),
    "6": ("expiry scan, 10,000 brokers, 1,000 expired", s6_expiry_scan),
    "7": ("RSS idle and with 10 brokers x 100 topics", s7_memory),
    "8": ("agent round to 3 NameServers, one black-holing", s8_agent_black_hole),
}
