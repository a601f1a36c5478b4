"""``make bench`` scenarios of route watching (``WatchTopicRoutes``), batch lookups and the lookup
limit. Every scenario runs a real NameServer process and real client processes on loopback and
takes well under 2 minutes.

- W1 lookup CPU per request against a bare ``grpc.aio`` handler (:mod:`bench.lookup_limit`);
- W2 a broker's agent SIGKILLed: time until each of 1,000 watchers (4 client processes) has the
  route without it (p50, p99, max; goal max <= 1 s);
- W3 10,000 open watch streams: server RSS, and the time to fan one change out to all of them;
- W4 ``PickupTopicRoutes`` of 100 topics against 100 ``PickupTopicRoute`` calls: server CPU per topic;
- W5 steady state: server CPU of 1,000 clients x 20 topics polling every 30 s (RocketMQ's way)
  against the same clients watching.

Client processes are ``python -m bench.watch_scenarios client ...``: they open their streams, print
``ready``, then print one JSON line with what they measured. Times across processes are wall-clock
(``time.time()``, one machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import grpc

from bench import lookup_limit
from bench.harness import ROOT, Server, namesrv, percentile, register_request, topic_configs
from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc

EXAMPLES = ROOT / "examples"
STREAMS_PER_CONNECTION = 50
"""Watch streams one client connection carries (a client process opens several connections)."""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + str(ROOT), PYTHONUNBUFFERED="1")


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# ---------------------------------------------------------------------- client processes


async def _watch_client(args: argparse.Namespace) -> None:
    """Open ``count`` watches of ``topics``; after ``ready``, record per stream the wall time at which
    a message makes the ``until`` condition true (``gone:BROKER`` = no broker of that name in the
    route of the first topic; ``perm:N`` = every QueueData of the first topic has perm N); print
    the times as JSON when all streams have one, or after ``timeout`` seconds."""
    topics = args.topics.split(",")
    kind, _, value = args.until.partition(":")
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", 64 << 20)]
    per_connection = args.per_connection
    channels = [
        grpc.aio.insecure_channel(args.address, options=options)
        for _ in range((args.count + per_connection - 1) // per_connection)
    ]
    times: list[float] = []
    first_seen = 0
    all_ready = asyncio.Event()
    all_matched = asyncio.Event()

    def matches(message: ns_pb2.WatchTopicRoutesResponse) -> bool:
        for change in message.changes:
            if change.topic != topics[0]:
                continue
            if kind == "gone":
                return change.removed or all(b.broker_name != value for b in change.route.broker_datas)
            return not change.removed and all(q.perm == int(value) for q in change.route.queue_datas)
        return False

    failures: dict[str, int] = {}

    async def one(index: int) -> None:
        nonlocal first_seen
        stub = ns_grpc.NameServerServiceStub(channels[index // per_connection])
        first = True
        while first:  # a stream that fails before its first message is opened again
            call = stub.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=topics), wait_for_ready=True)
            try:
                async for message in call:
                    if first:
                        first = False
                        first_seen += 1
                        if first_seen == args.count:
                            all_ready.set()
                        continue
                    if matches(message):
                        times.append(time.time())
                        if len(times) >= args.count:
                            all_matched.set()
                        if args.once:
                            call.cancel()
                            return
            except grpc.aio.AioRpcError as error:
                if not first:
                    raise
                failures[error.code().name] = failures.get(error.code().name, 0) + 1
                await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(one(i)) for i in range(args.count)]
    try:
        await asyncio.wait_for(all_ready.wait(), 120)
    except (TimeoutError, asyncio.TimeoutError):
        print(f"only {first_seen} of {args.count} streams opened; failures {failures}", flush=True)
        raise
    print("ready", flush=True)
    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
        await asyncio.wait_for(all_matched.wait(), args.timeout)
    print(json.dumps({"times": times, "pid": os.getpid(), "failures": failures}), flush=True)
    if not args.hold:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
    else:
        await asyncio.Event().wait()  # keep the streams open until killed (W5)


async def _poll_client(args: argparse.Namespace) -> None:
    """``count`` clients, each looking up each of its ``topics`` once every ``interval`` seconds,
    spread evenly in time (RocketMQ's ``updateTopicRouteInfoFromNameServer`` every 30 s); runs until
    killed, prints ``ready`` once every client has started."""
    topics = args.topics.split(",")
    options = [("grpc.use_local_subchannel_pool", 1)]
    per_connection = args.per_connection
    channels = [
        grpc.aio.insecure_channel(args.address, options=options)
        for _ in range((args.count + per_connection - 1) // per_connection)
    ]

    async def client(index: int) -> None:
        stub = ns_grpc.NameServerServiceStub(channels[index // per_connection])
        await asyncio.sleep(args.interval * index / args.count)
        while True:
            started = time.monotonic()
            for name in topics:
                await stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name), timeout=30)
            await asyncio.sleep(max(0.0, args.interval - (time.monotonic() - started)))

    tasks = [asyncio.create_task(client(i)) for i in range(args.count)]
    print("ready", flush=True)
    await asyncio.gather(*tasks)


def client_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench.watch_scenarios client")
    parser.add_argument("mode", choices=["watch", "poll"])
    parser.add_argument("address")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--topics", required=True, help="comma-separated")
    parser.add_argument("--until", default="perm:6")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--interval", type=float, default=30)
    parser.add_argument("--per-connection", type=int, default=STREAMS_PER_CONNECTION)
    parser.add_argument("--once", action="store_true", help="end each stream after its first match")
    parser.add_argument("--hold", action="store_true", help="keep the streams open until killed")
    args = parser.parse_args(argv)
    asyncio.run(_watch_client(args) if args.mode == "watch" else _poll_client(args))


@contextmanager
def clients(server: Server, processes: int, *args: str) -> Iterator[list[subprocess.Popen[str]]]:
    """``processes`` client processes (``client ARGS``), each waited for until it prints ``ready``;
    killed afterwards."""
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.watch_scenarios", "client", *args[:1], server.address, *args[1:]],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_env(),
        )
        for _ in range(processes)
    ]
    try:
        for process in started:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"client process did not start: {line!r}")
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def collect_times(processes: list[subprocess.Popen[str]]) -> tuple[list[float], dict[str, int]]:
    """The match times every client process printed, and the stream failures it had to retry."""
    times: list[float] = []
    failures: dict[str, int] = {}
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("a client process ended without results")
        report = json.loads(line)
        times.extend(report["times"])
        for code, count in report["failures"].items():
            failures[code] = failures.get(code, 0) + count
    return times, failures


def latency_summary(delays: list[float], expected: int) -> dict[str, Any]:
    ordered = sorted(delays)
    return {
        "watchers": expected,
        "received": len(ordered),
        "p50_ms": round(percentile(ordered, 50) * 1000, 1),
        "p99_ms": round(percentile(ordered, 99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1) if ordered else None,
    }


# ---------------------------------------------------------------------- W2: killed agent


def _agent(server: Server, conf: str, *extra: str) -> subprocess.Popen[str]:
    """A broker agent process; returns once it logged that its session is open (30 s at most)."""
    args = [
        sys.executable, "-m", "broker_agent", "--broker-config", str(EXAMPLES / conf),
        "--topics-json", str(EXAMPLES / "topics-quickstart.json"), "--namesrv-addr", server.address,
        "--set", "brokerIP1=127.0.0.1", *extra,
    ]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())
    opened = threading.Event()

    def pump() -> None:  # read stderr to the end, so the agent never blocks on a full pipe
        assert process.stderr is not None
        for line in process.stderr:
            if "session with" in line:
                opened.set()

    threading.Thread(target=pump, daemon=True).start()
    if not opened.wait(30):
        process.kill()
        raise RuntimeError(f"the agent of {conf} opened no session within 30 s")
    return process


def _wait_route(server: Server, topic: str, broker_names: set[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with server.channel() as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        while True:
            try:
                route = stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=5).route
                if {b.broker_name for b in route.broker_datas} == broker_names:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} never had the brokers {broker_names}")
            time.sleep(0.1)


def w2_killed_agent(quick: bool) -> dict[str, Any]:
    """broker-a's and broker-b's agents (sessions) serve TopicTest; 1,000 watchers in 4 client
    processes; SIGKILL broker-a's agent; per watcher, the time from the kill until it got TopicTest's
    route without broker-a."""
    watchers, processes = (400, 4) if quick else (1_000, 4)
    per_process = watchers // processes
    with ExitStack() as stack:
        server = stack.enter_context(namesrv("--scan-not-active-broker-interval", "1000"))
        agents = [
            _agent(server, "broker-a.properties"),
            _agent(server, "broker-b.properties", "--set", "listenPort=10921"),
        ]
        for agent in agents:
            stack.callback(agent.kill)
        _wait_route(server, "TopicTest", {"broker-a", "broker-b"})
        args = ["--count", str(per_process), "--topics", "TopicTest", "--until", "gone:broker-a", "--once"]
        started = stack.enter_context(clients(server, processes, "watch", *args, "--timeout", "20"))
        killed = time.time()
        agents[0].kill()
        times, failures = collect_times(started)
    result = latency_summary([t - killed for t in times], watchers)
    result.update(
        client_processes=processes,
        streams_reopened=failures,
        target="max <= 1000 ms from SIGKILL to the last of the watchers",
        met=result["received"] == watchers and result["max_ms"] is not None and result["max_ms"] <= 1000,
    )
    return result


# ---------------------------------------------------------------------- W3: 10,000 streams


def w3_many_streams(quick: bool) -> dict[str, Any]:
    """10,000 watch streams (5 client processes, 50 streams per connection) of one topic; server RSS
    before and with them; then one change (WipeWritePermOfBroker) and the time until every stream
    has it."""
    streams, processes = (2_000, 4) if quick else (10_000, 5)
    per_process = streams // processes
    with ExitStack() as stack:
        server = stack.enter_context(namesrv())
        with server.channel() as channel:
            ns_grpc.NameServerServiceStub(channel).RegisterBroker(
                register_request("broker-a", "127.0.0.1:10911", topic_configs(["FanOut"])), timeout=30
            )
        idle_rss = rss_mib(server.process.pid)
        opened = time.monotonic()
        args = ["--count", str(per_process), "--topics", "FanOut", "--until", "perm:4", "--timeout", "60"]
        started = stack.enter_context(clients(server, processes, "watch", *args))
        open_seconds = time.monotonic() - opened
        loaded_rss = rss_mib(server.process.pid)
        with server.channel() as channel:
            cpu_before = lookup_limit.cpu_seconds(server.process.pid)
            changed = time.time()
            admin_grpc.AdminServiceStub(channel).WipeWritePermOfBroker(
                admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"), timeout=30
            )
        times, failures = collect_times(started)
        fan_out_cpu = lookup_limit.cpu_seconds(server.process.pid) - cpu_before
    result = latency_summary([t - changed for t in times], streams)
    result.update(
        streams=streams,
        client_processes=processes,
        streams_reopened=failures,
        server_rss_mib_idle=idle_rss,
        server_rss_mib_with_streams=loaded_rss,
        server_kib_per_stream=round((loaded_rss - idle_rss) * 1024 / streams, 1),
        server_cpu_seconds_for_fan_out=round(fan_out_cpu, 2),
        server_cpu_us_per_stream=round(fan_out_cpu / streams * 1e6, 1),
        seconds_to_open_all=round(open_seconds, 1),
        target="every stream gets the change (time to the last one reported; clients share the 2 cores)",
        met=result["received"] == streams,
    )
    return result


# ---------------------------------------------------------------------- W4: batch lookups


def w4_batch_lookup(quick: bool) -> dict[str, Any]:
    """Server CPU per topic: PickupTopicRoutes of 100 topics against PickupTopicRoute (h2load)."""
    single_requests, batch_requests, rounds = (5_000, 500, 2) if quick else (20_000, 2_000, 3)
    names = [f"Batch{i:03d}" for i in range(100)]
    with namesrv() as server:
        with server.channel() as channel:
            stub = ns_grpc.NameServerServiceStub(channel)
            for index in range(2):
                stub.RegisterBroker(
                    register_request(f"broker-{index}", f"127.0.0.1:{20911 + index}", topic_configs(names)), timeout=30
                )
            batch = ns_pb2.PickupTopicRoutesRequest(topics=names)
            assert len(stub.PickupTopicRoutes(batch, timeout=10).routes) == 100
        single = ns_pb2.PickupTopicRouteRequest(topic=names[7])
        pid = server.process.pid
        path_single = "/namesrv.v1.NameServerService/PickupTopicRoute"
        path_batch = "/namesrv.v1.NameServerService/PickupTopicRoutes"
        lookup_limit.h2load_cpu(pid, server.address, path_single, single, single_requests // 4)
        lookup_limit.h2load_cpu(pid, server.address, path_batch, batch, batch_requests // 4)
        singles, batches = [], []
        for _ in range(rounds):
            singles.append(lookup_limit.h2load_cpu(pid, server.address, path_single, single, single_requests))
            batches.append(lookup_limit.h2load_cpu(pid, server.address, path_batch, batch, batch_requests, 16))
    single_us = min(r.cpu_us_per_request for r in singles)
    batch_us_per_topic = min(r.cpu_us_per_request for r in batches) / 100
    return {
        "single_cpu_us_per_topic": round(single_us, 2),
        "batch_cpu_us_per_topic": round(batch_us_per_topic, 2),
        "batch_cpu_us_per_call": round(batch_us_per_topic * 100, 1),
        "saving": round(single_us / batch_us_per_topic, 1),
        "target": "PickupTopicRoutes(100) costs less CPU per topic than 100 lookups",
        "met": batch_us_per_topic < single_us,
    }


# ---------------------------------------------------------------------- W5: polling vs watching


def _cpu_over(pid: int, seconds: float) -> float:
    before = lookup_limit.cpu_seconds(pid)
    time.sleep(seconds)
    return (lookup_limit.cpu_seconds(pid) - before) / seconds


def _per_peer_config(directory: str, watched_topics: int) -> str:
    """A namesrv.conf in ``directory`` letting one client address watch ``watched_topics`` topics."""
    path = Path(directory, "namesrv.conf")
    path.write_text(f"routeWatchMaxTopicsPerPeer={watched_topics}\n")
    return str(path)


def w5_poll_vs_watch(quick: bool) -> dict[str, Any]:
    """1,000 clients x 20 topics: polling each topic every 30 s (667 lookups/s, RocketMQ's default
    pollNameServerInterval) against watching them (1,000 streams, no route change), each for a
    measured window; server CPU as a share of one core. Real time, not scaled: the window is short
    because both loads are steady."""
    count, window, processes = (200, 10.0, 2) if quick else (1_000, 30.0, 4)
    names = [f"Steady{i:02d}" for i in range(20)]
    per_process = count // processes
    result: dict[str, Any] = {"clients": count, "topics_per_client": 20, "window_seconds": window}
    # Every client here has the address 127.0.0.1, one peer to routeWatchMaxTopicsPerPeer (10,000
    # watched topics a serving process): raised, as for many clients behind one NAT (docs/limits.md).
    with tempfile.TemporaryDirectory(prefix="w5-") as tmp, namesrv("-c", _per_peer_config(tmp, count * 20)) as server:
        with server.channel() as channel:
            ns_grpc.NameServerServiceStub(channel).RegisterBroker(
                register_request("broker-a", "127.0.0.1:10911", topic_configs(names)), timeout=30
            )
        pid = server.process.pid
        result["idle_cpu_percent"] = round(_cpu_over(pid, 3.0) * 100, 2)
        topics = ",".join(names)
        with clients(server, processes, "poll", "--count", str(per_process), "--topics", topics, "--interval", "30"):
            time.sleep(min(30.0, window))  # every client has started polling (they start spread over 30 s)
            result["polling_cpu_percent"] = round(_cpu_over(pid, window) * 100, 2)
            result["polling_lookups_per_second"] = round(count * 20 / 30, 1)
        with clients(server, processes, "watch", "--count", str(per_process), "--topics", topics, "--hold",
                     "--timeout", "0"):  # fmt: skip
            time.sleep(2.0)
            result["watching_cpu_percent"] = round(_cpu_over(pid, window) * 100, 2)
            result["watching_rss_mib"] = rss_mib(pid)
    result["saving"] = round(result["polling_cpu_percent"] / max(result["watching_cpu_percent"], 0.01), 1)
    result["target"] = "watching costs the NameServer less CPU than polling"
    result["met"] = result["watching_cpu_percent"] < result["polling_cpu_percent"]
    return result


# ---------------------------------------------------------------------- registration


def w1_lookup_limit(quick: bool) -> dict[str, Any]:
    return lookup_limit.scenario(quick)


WATCH_SCENARIOS = {
    "W1": ("PickupTopicRoute server CPU vs a bare grpc.aio handler (same bytes)", w1_lookup_limit),
    "W2": ("agent SIGKILL -> 1,000 watchers have the route without it", w2_killed_agent),
    "W3": ("10,000 open watch streams: RSS, fan-out of one change", w3_many_streams),
    "W4": ("PickupTopicRoutes(100 topics) vs 100 PickupTopicRoute: CPU per topic", w4_batch_lookup),
    "W5": ("1,000 clients x 20 topics: polling every 30 s vs watching (server CPU)", w5_poll_vs_watch),
}
"""Scenario key -> (title, function(quick) -> result dict with ``target`` and ``met``)."""


def watch_summary(key: str, r: dict[str, Any]) -> str:
    """The one-line measured value of a watch scenario for docs/benchmarks.md."""
    if key == "W1":
        return (
            f"ratio {r['ratio']:.2f} (lowest of the rounds; median of round ratios "
            f"{r['median_of_round_ratios']:.2f}, of medians {r['ratio_of_medians']:.2f}): "
            f"{r['namesrv_cpu_us_per_request']} vs {r['bare_cpu_us_per_request']} us CPU per request"
        )
    if key in ("W2", "W3"):
        extra = ""
        if key == "W3":
            extra = (
                f"; RSS {r['server_rss_mib_idle']} -> {r['server_rss_mib_with_streams']} MiB "
                f"({r['server_kib_per_stream']} KiB per stream); server CPU for the fan-out "
                f"{r['server_cpu_seconds_for_fan_out']} s ({r['server_cpu_us_per_stream']} us per stream)"
            )
        return (
            f"{r['received']}/{r['watchers']} got it: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, "
            f"max {r['max_ms']} ms{extra}"
        )
    if key == "W4":
        return (
            f"{r['batch_cpu_us_per_topic']} us per topic batched vs {r['single_cpu_us_per_topic']} us "
            f"per single lookup ({r['saving']} x less)"
        )
    if key == "W5":
        return (
            f"polling {r['polling_cpu_percent']} % of a core ({r['polling_lookups_per_second']} lookups/s) vs "
            f"watching {r['watching_cpu_percent']} % ({r['saving']} x less); idle {r['idle_cpu_percent']} %"
        )
    return json.dumps(r)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        client_main(argv[1:])
        return 0
    keys = argv or list(WATCH_SCENARIOS)
    quick = "--quick" in keys
    for key in [k for k in keys if k in WATCH_SCENARIOS]:
        started = time.monotonic()
        result = WATCH_SCENARIOS[key][1](quick)
        print(f"[{key}] {time.monotonic() - started:.1f} s: {watch_summary(key, result)}", flush=True)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
