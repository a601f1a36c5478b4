"""WatchTopicRoutes and PickupTopicRoutes against real NameServer (and agent) processes on loopback:
first message, every change source, a killed agent's broker leaving the stream, a watcher that never
reads (coalesced, flat server memory), bad input, clean-up after a killed client, the client-side
RouteCache's reconnect and resync, and ``namesrv-admin watch``."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.client import RouteCache
from namesrv_grpc.core.model import DataVersion
from tests.metrics_support import scrape
from tests.support import (
    EXAMPLES,
    LineWatcher,
    NamesrvProcess,
    Stubs,
    _env,
    error_info,
    free_port,
    poll_until,
    register_request,
    running_namesrv,
    spawn_agent,
    topic,
)

# One NameServer for the module, emptied before each test (tests/conftest.py).
pytestmark = pytest.mark.shared_namesrv

SCAN = ("--scan-not-active-broker-interval", "200")
Change = ns_pb2.TopicRouteChange


class Watch:
    """A WatchTopicRoutes stream read by a background thread into a queue."""

    def __init__(self, stubs: Stubs, topics: list[str]) -> None:
        self.call = stubs.ns.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=topics))
        self.messages: queue.Queue[ns_pb2.WatchTopicRoutesResponse | grpc.RpcError] = queue.Queue()
        self.received: list[ns_pb2.WatchTopicRoutesResponse] = []
        self.routes: dict[str, types_pb2.TopicRouteData | None] = {}
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for message in self.call:
                self.messages.put(message)
        except grpc.RpcError as error:
            self.messages.put(error)

    def next(self, timeout: float = 10) -> ns_pb2.WatchTopicRoutesResponse:
        item = self.messages.get(timeout=timeout)
        if isinstance(item, grpc.RpcError):
            raise item
        self.received.append(item)
        for change in item.changes:
            self.routes[change.topic] = None if change.removed else change.route
        return item

    def until(self, check: Callable[[dict[str, types_pb2.TopicRouteData | None]], bool], timeout: float = 10) -> float:
        """Read messages until ``check(routes)`` holds; return the seconds it took."""
        start = time.monotonic()
        while not check(self.routes):
            left = start + timeout - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not seen within {timeout} s; routes now: {self.routes}")
            try:
                self.next(left)
            except queue.Empty:
                continue
        return time.monotonic() - start

    def cancel(self) -> None:
        self.call.cancel()


def addrs(route: types_pb2.TopicRouteData | None) -> dict[str, dict[int, str]]:
    """broker name -> {id: address} of a route ({} for None)."""
    return {} if route is None else {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}


def perms(route: types_pb2.TopicRouteData | None) -> dict[str, int]:
    return {} if route is None else {q.broker_name: q.perm for q in route.queue_datas}


def rpc_error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def code(error: grpc.RpcError) -> grpc.StatusCode:
    return cast(grpc.Call, error).code()


# ---------------------------------------------------------------------- first message, batch lookups


def test_first_message_is_every_watched_topic_now(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1"), topic("T2", read=2)]))
    watch = Watch(stubs, ["T1", "Missing", "T1"])
    first = watch.next()
    assert [c.topic for c in first.changes] == ["T1", "Missing"]  # duplicates watched once
    t1, missing = first.changes
    assert not t1.removed
    assert t1.route == stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="T1")).route
    assert missing.removed
    assert not missing.HasField("route")
    assert first.revision >= 1
    watch.cancel()


def test_pickup_topic_routes_answers_many_topics(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1"), topic("T2", read=2)]))
    answer = stubs.ns.PickupTopicRoutes(ns_pb2.PickupTopicRoutesRequest(topics=["T2", "Nope", "T1", "T2", "Gone"]))
    assert sorted(answer.routes) == ["T1", "T2"]
    assert list(answer.not_found) == ["Nope", "Gone"]
    for name in ("T1", "T2"):
        single = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name)).route
        assert answer.routes[name] == single
    assert answer.routes["T2"].queue_datas[0].read_queue_nums == 2


def test_bad_input_gets_a_clear_status_and_keeps_nothing(stubs: Stubs) -> None:
    calls = {
        "watch": lambda topics: next(
            iter(stubs.ns.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=topics), timeout=30))
        ),
        "pickup": lambda topics: stubs.ns.PickupTopicRoutes(ns_pb2.PickupTopicRoutesRequest(topics=topics), timeout=30),
    }
    for call in calls.values():
        empty = rpc_error(partial(call, []))
        assert code(empty) == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(empty).metadata["field"] == "topics"
        huge = rpc_error(partial(call, [f"Topic{i}" for i in range(100_000)]))
        assert code(huge) == grpc.StatusCode.INVALID_ARGUMENT
        assert "100000 topics; at most 1000" in cast(grpc.Call, huge).details()
        assert "routeWatchMaxTopics" in cast(grpc.Call, huge).details()
        bad = rpc_error(partial(call, ["Good", "bad topic\n"]))
        assert code(bad) == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(bad).metadata["field"] == "topics[1]"
    stubs.admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config={"routeWatchMaxWatchers": "1"}))
    first = Watch(stubs, ["A"])
    first.next()
    refused = rpc_error(lambda: calls["watch"](["B"]))
    assert code(refused) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(refused).reason == "TOO_MANY_ROUTE_WATCHERS"
    first.cancel()


# ---------------------------------------------------------------------- change sources


def test_every_change_source_reaches_watchers(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    watch = Watch(stubs, ["T1", "T2", "TExp"])
    watch.until(lambda r: len(r) == 3 and all(v is None for v in r.values()))
    master = register_request(topics=[topic("T1"), topic("T2")])
    master.instance_id = "instance-1"

    stubs.ns.RegisterBroker(master)  # registration
    watch.until(lambda r: addrs(r["T1"]) == {"broker-a": {0: "127.0.0.1:10911"}} and r["T2"] is not None)

    slave = register_request(broker_id=1, broker_addr="127.0.0.1:10921")  # a slave joins
    stubs.ns.RegisterBroker(slave)
    watch.until(lambda r: addrs(r["T1"])["broker-a"] == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"})

    stubs.ns.UnregisterBroker(  # unregister
        ns_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1, broker_addr="127.0.0.1:10921"
        )
    )
    watch.until(lambda r: addrs(r["T1"])["broker-a"] == {0: "127.0.0.1:10911"})

    stubs.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"))
    watch.until(lambda r: perms(r["T1"]) == {"broker-a": 4} and perms(r["T2"]) == {"broker-a": 4})
    stubs.admin.AddWritePermOfBroker(admin_pb2.AddWritePermOfBrokerRequest(broker_name="broker-a"))
    watch.until(lambda r: perms(r["T1"]) == {"broker-a": 6})

    stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="T2"))  # delete topic
    watch.until(lambda r: r["T2"] is None)
    queue_data = types_pb2.QueueData(broker_name="broker-a", read_queue_nums=3, write_queue_nums=3, perm=6)
    stubs.admin.RegisterTopic(admin_pb2.RegisterTopicRequest(topic="T2", queue_datas=[queue_data]))
    watch.until(lambda r: r["T2"] is not None and r["T2"].queue_datas[0].read_queue_nums == 3)

    # KV order config, once orderMessageEnable is on (turning it on is itself a change of every route).
    stubs.admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config={"orderMessageEnable": "true"}))
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="T1", value="broker-a:4"))
    watch.until(lambda r: r["T1"] is not None and r["T1"].order_topic_conf == "broker-a:4")
    stubs.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="T1"))
    watch.until(lambda r: r["T1"] is not None and r["T1"].order_topic_conf == "")

    # Expiry (S13): a broker with a 500 ms heartbeat timeout that never beats.
    expiring = register_request(
        broker_name="broker-x", broker_addr="127.0.0.1:10931", topics=[topic("TExp")], heartbeat_timeout_millis=500
    )
    stubs.ns.RegisterBroker(expiring)
    watch.until(lambda r: r["TExp"] is not None)
    watch.until(lambda r: r["TExp"] is None)

    # Session end (S15): the session of broker-a's instance ends, the broker goes.
    hello = ns_pb2.SessionHello(
        cluster_name="DefaultCluster", broker_name="broker-a", broker_addr="127.0.0.1:10911", instance_id="instance-1"
    )
    requests: queue.Queue[ns_pb2.OpenBrokerSessionRequest | None] = queue.Queue()
    requests.put(ns_pb2.OpenBrokerSessionRequest(hello=hello))
    session = stubs.ns.OpenBrokerSession(iter(requests.get, None))
    assert next(session).WhichOneof("kind") == "accepted"
    session.cancel()
    watch.until(lambda r: r["T1"] is None and r["T2"] is None)

    revisions = [m.revision for m in watch.received]
    assert revisions == sorted(revisions)
    assert len(set(revisions)) == len(revisions)  # every message a new revision
    watch.cancel()


def test_remoting_registrations_and_connection_close_reach_grpc_watchers(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    """A Java broker registering over remoting (9876) and its connection closing (S15) are changes
    like any other."""
    from namesrv_grpc.remoting.codes import RequestCode
    from namesrv_grpc.wire import bodies
    from tests.remoting_support import RemotingTestClient

    watch = Watch(stubs, ["RemotingTopic"])
    watch.until(lambda r: "RemotingTopic" in r and r["RemotingTopic"] is None)
    # a Java broker always carries its system topics: one topic alone would be refused (S42)
    topics = {"RemotingTopic": topic("RemotingTopic"), "SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", 1, 1)}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    fields = {
        "clusterName": "DefaultCluster", "brokerName": "broker-r", "brokerId": "0", "brokerAddr": "127.0.0.1:10777",
        "haServerAddr": "", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }  # fmt: skip
    with RemotingTestClient(namesrv.remoting_address) as broker:
        assert broker.call(RequestCode.REGISTER_BROKER, fields, body).code == 0
        watch.until(lambda r: addrs(r.get("RemotingTopic")) == {"broker-r": {0: "127.0.0.1:10777"}})
    elapsed = watch.until(lambda r: r["RemotingTopic"] is None)
    print(f"\nremoting connection closed -> route gone on the gRPC watch in {elapsed * 1000:.0f} ms")
    watch.cancel()


@contextmanager
def agent_process(*args: str) -> Iterator[tuple[subprocess.Popen[str], LineWatcher]]:
    process = spawn_agent(*args)
    log = LineWatcher(process.stderr)
    try:
        yield process, log
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_killed_agents_broker_leaves_the_stream_within_1s(tmp_path: Path) -> None:
    with ExitStack() as stack:
        server = stack.enter_context(running_namesrv(tmp_path / "ns", *SCAN))
        args = [
            "--broker-config", str(EXAMPLES / "broker-a.properties"),
            "--topics-json", str(EXAMPLES / "topics-quickstart.json"),
            "--namesrv-addr", server.address, "--set", "brokerIP1=127.0.0.1",
        ]  # fmt: skip
        process, log = stack.enter_context(agent_process(*args))
        log.wait_for("session with")
        stubs = Stubs(stack.enter_context(server.channel()))
        watch = Watch(stubs, ["TopicTest"])
        watch.until(lambda r: addrs(r.get("TopicTest")) == {"broker-a": {0: "127.0.0.1:10911"}})
        process.kill()
        elapsed = watch.until(lambda r: r.get("TopicTest") is None, timeout=10)
        print(f"\nagent SIGKILL -> route without broker-a on the watch stream in {elapsed * 1000:.0f} ms")
        assert elapsed < 3.0  # goal 1 s (measured in bench/watch_scenarios.py); margin for a loaded machine
        watch.cancel()


# ---------------------------------------------------------------------- backpressure and clean-up


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def test_a_watcher_that_never_reads_gets_coalesced_updates_and_memory_stays_flat(namesrv: NamesrvProcess) -> None:
    topics = [f"Slow{i:02d}-{'x' * 100}" for i in range(50)]
    options = [("grpc.http2.bdp_probe", 0)]  # keep the client's receive window at 64 KiB
    with namesrv.channel() as channel, grpc.insecure_channel(namesrv.address, options=options) as slow_channel:
        stubs = Stubs(channel)
        stubs.ns.RegisterBroker(register_request(topics=[topic(t) for t in topics]))
        for i in range(8):  # more broker names: bigger routes
            stubs.ns.RegisterBroker(
                register_request(
                    broker_name=f"b{i}", broker_addr=f"127.0.0.1:{11000 + i}", topics=[topic(t) for t in topics]
                )
            )
        slow = Stubs(slow_channel).ns.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=topics))
        wipe = admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a")
        add = admin_pb2.AddWritePermOfBrokerRequest(broker_name="broker-a")
        for _ in range(100):  # warm up: the stream's buffers fill, the server's allocator settles
            stubs.admin.WipeWritePermOfBroker(wipe)
            stubs.admin.AddWritePermOfBroker(add)
        before = rss_bytes(namesrv.process.pid)
        changes = 1_000
        for _ in range(changes // 2):  # each call changes the route of all 50 topics (~2 KiB each)
            stubs.admin.WipeWritePermOfBroker(wipe)
            stubs.admin.AddWritePermOfBroker(add)
        after = rss_bytes(namesrv.process.pid)
        stubs.admin.WipeWritePermOfBroker(wipe)  # the last change: broker-a read-only
        growth = after - before
        print(f"\nserver RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB after {changes} unread changes")
        assert growth < 8 * 2**20
        messages = 0
        latest: dict[str, int] = {}
        for message in slow:
            messages += 1
            for change in message.changes:
                latest[change.topic] = perms(change.route)["broker-a"]
            if len(latest) == len(topics) and set(latest.values()) == {4}:
                break
        slow.cancel()
    print(f"{messages} messages delivered for {changes + 201} changes")
    assert messages < changes / 5  # coalesced: the window holds a few messages, the hub one entry per topic


def test_killed_watch_client_leaves_nothing_behind(tmp_path: Path) -> None:
    port = free_port()
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    with running_namesrv(tmp_path / "ns", "--metrics-port", str(port)) as server:
        client = subprocess.Popen(
            [sys.executable, "-c", WATCH_CLIENT, server.address],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        try:
            assert client.stdout is not None
            assert client.stdout.readline().strip() == "watching"
            assert scrape(metrics_url).value("namesrv_route_watchers") == 5
            client.kill()
            client.wait(10)
            poll_until(lambda: scrape(metrics_url).value("namesrv_route_watchers") == 0, timeout=20, interval=0.1)
            after = scrape(metrics_url)
            assert after.value("namesrv_route_watched_topics") == 0
            assert after.value("grpc_server_started_total", grpc_method="WatchTopicRoutes") == 5
            handled = sum(s.value for s in after.find("grpc_server_handled_total", grpc_method="WatchTopicRoutes"))
            assert handled == 5
        finally:
            if client.poll() is None:
                client.kill()


def test_silent_watch_client_is_found_by_keepalive(tmp_path: Path) -> None:
    """A watcher that stops answering (SIGSTOP: its socket stays open, nothing reads) is dropped when
    the server's keepalive pings (every 10 s, 5 s timeout) go unanswered."""
    port = free_port()
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    with running_namesrv(tmp_path / "ns", "--metrics-port", str(port)) as server:
        client = subprocess.Popen(
            [sys.executable, "-c", WATCH_CLIENT, server.address], stdout=subprocess.PIPE, text=True, env=_env()
        )
        try:
            assert client.stdout is not None
            assert client.stdout.readline().strip() == "watching"
            client.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            poll_until(lambda: scrape(metrics_url).value("namesrv_route_watchers") == 0, timeout=30, interval=0.5)
            print(f"\nsilent watcher dropped after {time.monotonic() - stopped:.1f} s")
            assert scrape(metrics_url).value("namesrv_route_watched_topics") == 0
        finally:
            client.kill()
            client.wait(10)


WATCH_CLIENT = """
import sys, grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2, name_server_service_pb2_grpc as ns_grpc

channel = grpc.insecure_channel(sys.argv[1])
stub = ns_grpc.NameServerServiceStub(channel)
calls = [stub.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=[f"T{i}", "Shared"])) for i in range(5)]
for call in calls:
    next(call)
print("watching", flush=True)
sys.stdin.read() if False else __import__("time").sleep(600)
"""


# ---------------------------------------------------------------------- the client helper and CLI


def test_route_cache_reconnects_and_resyncs_against_another_namesrv(tmp_path: Path) -> None:
    with ExitStack() as stack:
        first = stack.enter_context(running_namesrv(tmp_path / "ns0"))
        second = stack.enter_context(running_namesrv(tmp_path / "ns1"))
        with first.channel() as channel:
            Stubs(channel).ns.RegisterBroker(register_request(topics=[topic("T1"), topic("OnlyFirst")]))
        second_stubs = Stubs(stack.enter_context(second.channel()))
        second_stubs.ns.RegisterBroker(
            register_request(broker_name="broker-b", broker_addr="127.0.0.1:10999", topics=[topic("T1")])
        )
        updates: list[Any] = []
        cache = stack.enter_context(
            RouteCache(f"{first.address};{second.address}", ["T1", "OnlyFirst"], on_update=updates.append)
        )
        assert cache.wait_synced(timeout=10)
        assert cache.namesrv == first.address
        assert addrs(cache.route("T1")) == {"broker-a": {0: "127.0.0.1:10911"}}
        assert cache.route("OnlyFirst") is not None

        first.stop()  # SIGTERM: the server ends its watches (UNAVAILABLE); the cache moves on
        assert cache.wait_for(lambda c: c.namesrv == second.address and c.synced, timeout=15)
        assert addrs(cache.route("T1")) == {"broker-b": {0: "127.0.0.1:10999"}}
        assert cache.route("OnlyFirst") is None  # resynced: the second NameServer has no such route
        assert cache.resyncs == 2

        second_stubs.ns.RegisterBroker(
            register_request(broker_name="broker-b", broker_addr="127.0.0.1:10999", topics=[topic("T1", read=7)],
                             version=DataVersion(0, 2, 2))
        )  # fmt: skip
        assert cache.wait_for(
            lambda c: (r := c.route("T1")) is not None and r.queue_datas[0].read_queue_nums == 7, timeout=10
        )
        assert any(u.resync and u.namesrv == second.address for u in updates)
        assert updates[-1].topic == "T1"
        assert not updates[-1].resync


def test_route_cache_skips_a_namesrv_that_does_not_answer(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1")]))
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    with RouteCache([dead, namesrv.address], ["T1"], retry_max_seconds=0.5) as cache:
        assert cache.wait_synced(timeout=15)
        assert cache.namesrv == namesrv.address
        assert addrs(cache.route("T1")) == {"broker-a": {0: "127.0.0.1:10911"}}
        assert set(cache.routes()) == {"T1"}


def test_admin_watch_prints_one_json_line_per_change(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "namesrv_grpc.admin.cli", "-n", namesrv.address, "watch", "T1", "T0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        lines = [json.loads(process.stdout.readline()) for _ in range(2)]
        assert [(line["topic"], line["removed"], line["resync"]) for line in lines] == [
            ("T1", False, True),
            ("T0", True, True),
        ]
        assert lines[0]["route"]["broker_datas"][0]["broker_name"] == "broker-a"
        stubs.admin.WipeWritePermOfBroker(admin_pb2.WipeWritePermOfBrokerRequest(broker_name="broker-a"))
        change = json.loads(process.stdout.readline())
        assert change["topic"] == "T1"
        assert not change["resync"]
        assert change["revision"] > lines[0]["revision"]
        assert change["route"]["queue_datas"][0]["perm"] == 4
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_admin_watch_of_a_bad_topic_exits_1(namesrv: NamesrvProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "namesrv_grpc.admin.cli", "-n", namesrv.address, "watch", "bad topic\t"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
    )
    assert result.returncode == 1
    assert "INVALID_ARGUMENT" in result.stderr
    assert "topics[0]" in result.stderr
