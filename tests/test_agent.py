"""The broker agent against real NameServer processes (S30-S36) and the ``broker-agent`` command.

Every NameServer here is a real ``python -m namesrv_grpc`` process on 127.0.0.1; the agent's broker
identity comes from Apache RocketMQ's sample broker.conf files and a real broker's topics.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker_agent.agent import BrokerAgent, RoundResult, registration_period_millis
from broker_agent.client import GrpcNamesrvClient
from broker_agent.config import BrokerConfig, load_broker_config
from broker_agent.metrics import SESSION_STATES
from broker_agent.topics import TopicSource
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.core.route_tables import wall_clock_millis
from namesrv_grpc.runtime.properties import read_properties
from namesrv_grpc.wire.grpc_register_body import decode_body
from tests.metrics_support import free_port, scrape
from tests.support import (
    LOADED_BOX_SLACK_SECONDS,
    NamesrvProcess,
    Stubs,
    fixture_path,
    poll_until,
    run_cli,
    running_namesrv,
    spawn_agent,
)

# One NameServer for the module, emptied before each test (tests/conftest.py).
pytestmark = pytest.mark.shared_namesrv

QUICKSTART = fixture_path("topics-quickstart.json")
MASTER_ADDR = "127.0.0.1:10911"
SLAVE_ADDR = "127.0.0.1:10921"


# --- helpers -----------------------------------------------------------------------------------


def agent_config(name: str, namesrv_addrs: str, **overrides: str) -> BrokerConfig:
    """broker.conf fixture ``name`` with brokerIP1=127.0.0.1 and ``overrides`` (like --set)."""
    props = read_properties(fixture_path(name))
    props["brokerIP1"] = "127.0.0.1"
    props.update(overrides)
    return load_broker_config(props, name, namesrv_addr_override=namesrv_addrs, environ={})


def topic_source(config: BrokerConfig, path: Path = QUICKSTART) -> TopicSource:
    source = TopicSource(config, path, wall_clock_millis)
    source.load_initial()
    return source


def route_of(address: str, topic: str) -> Any:
    """The TopicRouteData of ``topic`` on the NameServer at ``address``; None when NOT_FOUND."""
    with grpc.insecure_channel(address) as channel:
        try:
            return Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=5).route
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise


def brokers_of(address: str) -> dict[str, dict[int, str]]:
    """broker name -> {broker id: address} on the NameServer at ``address``."""
    with grpc.insecure_channel(address) as channel:
        info = Stubs(channel).ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    return {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}


def all_topics(address: str) -> list[str]:
    with grpc.insecure_channel(address) as channel:
        return list(Stubs(channel).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5).topics)


def queue_perms(route: Any) -> dict[str, tuple[int, int, int]]:
    return {q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def write_topics(path: Path, topics: dict[str, dict[str, Any]], counter: int) -> None:
    """Replace topics.json as the broker does (new file renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    document = {"dataVersion": {"counter": counter, "timestamp": wall_clock_millis()}, "topicConfigTable": topics}
    tmp.write_text(json.dumps(document), encoding="utf-8")
    os.replace(tmp, path)  # a new inode: TopicSource sees the change whatever the mtime resolution


def quickstart_plus(extra: str) -> dict[str, dict[str, Any]]:
    topics: dict[str, dict[str, Any]] = json.loads(QUICKSTART.read_text(encoding="utf-8"))["topicConfigTable"]
    topics[extra] = {"topicName": extra, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    return topics


@dataclass
class Call:
    kind: str
    address: str
    request: Any
    at: float


class RecordingClient:
    """A real gRPC client that also records every call (the agent's client_factory hook)."""

    def __init__(self, address: str, calls: list[Call]) -> None:
        self.address = address
        self.calls = calls
        self.inner = GrpcNamesrvClient(address)

    def _record(self, kind: str, request: Any) -> None:
        self.calls.append(Call(kind, self.address, request, time.monotonic()))

    async def register_broker(
        self, request: ns_pb2.RegisterBrokerRequest, timeout: float
    ) -> ns_pb2.RegisterBrokerResponse:
        self._record("register", request)
        return await self.inner.register_broker(request, timeout)

    async def unregister_broker(self, request: ns_pb2.UnregisterBrokerRequest, timeout: float) -> None:
        self._record("unregister", request)
        await self.inner.unregister_broker(request, timeout)

    async def query_data_version(
        self, request: ns_pb2.QueryDataVersionRequest, timeout: float
    ) -> ns_pb2.QueryDataVersionResponse:
        self._record("query", request)
        return await self.inner.query_data_version(request, timeout)

    async def close(self) -> None:
        await self.inner.close()


def recording(calls: list[Call]) -> Callable[[str], RecordingClient]:
    return lambda address: RecordingClient(address, calls)


def kinds(calls: list[Call]) -> list[str]:
    return [c.kind for c in calls]


async def one_round(config: BrokerConfig, source: TopicSource | None = None, *, force: bool = True) -> RoundResult:
    agent = BrokerAgent(config, source or topic_source(config))
    try:
        return await agent.register_all(force=force)
    finally:
        await agent.close()


@contextmanager
def black_hole(accepts: bool) -> Iterator[str]:
    """A TCP port on 127.0.0.1 that never answers: it either never accepts, or accepts and stays
    silent. Yields its ``host:port``."""
    hole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept_forever() -> None:
        hole.settimeout(0.05)
        while not done.is_set():
            try:
                held.append(hole.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_forever, daemon=True) if accepts else None
    if thread:
        thread.start()
    try:
        yield f"127.0.0.1:{hole.getsockname()[1]}"
    finally:
        done.set()
        if thread:
            thread.join(2)
        for conn in held:
            conn.close()
        hole.close()


# --- S32/S33: every NameServer -------------------------------------------------------------------


def test_s32_s33_registers_with_two_namesrvs_then_survives_one_stopping(tmp_path: Path):
    with running_namesrv(tmp_path / "n1") as n1, running_namesrv(tmp_path / "n2") as n2:
        config = agent_config("broker-a.properties", f"{n1.address};{n2.address}", registerBrokerTimeoutMills="5000")
        calls: list[Call] = []

        async def scenario() -> tuple[RoundResult, RoundResult, RoundResult, float]:
            agent = BrokerAgent(config, topic_source(config), recording(calls))
            try:
                first = await agent.register_all(force=True)
                n2.stop()  # SIGTERM midway
                started = time.monotonic()
                second = await agent.register_all(force=True)
                elapsed = time.monotonic() - started
                third = await agent.register_all(force=False)  # n2 cannot answer: register anyway (S31)
                return first, second, third, elapsed
            finally:
                await agent.close()

        first, second, third, elapsed = asyncio.run(scenario())

        assert set(first.responses) == {n1.address, n2.address}
        assert first.errors == {}
        # the request carries the broker's identity (S32)
        request = next(c.request for c in calls if c.kind == "register")
        assert (request.cluster_name, request.broker_name, request.broker_id) == ("DefaultCluster", "broker-a", 0)
        assert (request.broker_addr, request.ha_server_addr) == (MASTER_ADDR, "127.0.0.1:10912")
        assert request.compressed is False
        body = decode_body(request.body, request.body_crc32c, compressed=False)
        assert len(body.topic_config_table) == 9
        assert body.data_version == DataVersion(0, 1551626364371, 3)

        assert set(second.responses) == {n1.address}
        assert set(second.errors) == {n2.address}
        assert "UNAVAILABLE" in second.errors[n2.address]
        # a stopped NameServer refuses at once; the round is bounded by registerBrokerTimeoutMills anyway
        assert elapsed < 5.0 + LOADED_BOX_SLACK_SECONDS, f"round took {elapsed:.2f} s"

        assert not third.skipped
        assert set(third.responses) == {n1.address}
        assert set(third.errors) == {n2.address}
        assert kinds(calls).count("query") == 2
        assert kinds(calls).count("register") == 2 + 2 + 2

        route = route_of(n1.address, "TopicTest")
        assert route is not None
        assert queue_perms(route) == {"broker-a": (4, 4, 6)}
        assert [dict(b.broker_addrs) for b in route.broker_datas] == [{0: MASTER_ADDR}]


def test_s32_both_namesrvs_have_the_route(tmp_path: Path):
    with running_namesrv(tmp_path / "n1") as n1, running_namesrv(tmp_path / "n2") as n2:
        config = agent_config("broker-a.properties", f"{n1.address};{n2.address}")
        result = asyncio.run(one_round(config))
        assert set(result.responses) == {n1.address, n2.address}
        for server in (n1, n2):
            route = route_of(server.address, "TopicTest")
            assert route is not None, server.address
            assert queue_perms(route) == {"broker-a": (4, 4, 6)}
            assert route.broker_datas[0].cluster == "DefaultCluster"
            assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_ADDR}
            assert queue_perms(route_of(server.address, "BenchmarkTest")) == {"broker-a": (1024, 1024, 6)}
            assert set(all_topics(server.address)) >= {
                "TopicTest",
                "TBW102",
                "OFFSET_MOVED_EVENT",
                "%RETRY%please_rename_unique_group_name_4",
            }


@pytest.mark.parametrize("accepts", [False, True], ids=["never-accepts", "accepts-never-answers"])
def test_s33_black_hole_namesrv_does_not_hold_up_the_round(namesrv: NamesrvProcess, accepts: bool):
    with black_hole(accepts) as hole:
        config = agent_config("broker-a.properties", f"{hole};{namesrv.address}", registerBrokerTimeoutMills="1000")

        async def scenario() -> tuple[RoundResult, float, dict[str, str], float]:
            agent = BrokerAgent(config, topic_source(config))
            try:
                started = time.monotonic()
                result = await agent.register_all(force=True)
                elapsed = time.monotonic() - started
                route = await asyncio.to_thread(route_of, namesrv.address, "TopicTest")
                assert route is not None
                started = time.monotonic()
                errors = await agent.unregister_all()
                return result, elapsed, errors, time.monotonic() - started
            finally:
                await agent.close()

        result, elapsed, unregister_errors, unregister_elapsed = asyncio.run(scenario())

    assert set(result.responses) == {namesrv.address}
    assert set(result.errors) == {hole}
    # gRPC reports a silent peer as a deadline, or as a connection attempt that never got SETTINGS
    assert result.errors[hole].split(":")[0] in {"DEADLINE_EXCEEDED", "UNAVAILABLE"}, result.errors[hole]
    # bounded by registerBrokerTimeoutMills (1 s), not by gRPC's 20 s connect timeout or forever
    assert elapsed < 1.0 + LOADED_BOX_SLACK_SECONDS, f"round took {elapsed:.2f} s with registerBrokerTimeoutMills=1000"
    # S36: the black hole's failure is reported, not fatal; the healthy NameServer is unregistered
    assert set(unregister_errors) == {hole}
    assert unregister_elapsed < 1.0 + LOADED_BOX_SLACK_SECONDS
    assert route_of(namesrv.address, "TopicTest") is None


# --- S31: forceRegister=false ----------------------------------------------------------------------


def test_s31_unchanged_topics_skip_registration_and_refresh_liveness(tmp_path: Path, namesrv: NamesrvProcess):
    topics_path = tmp_path / "topics.json"
    shutil.copyfile(QUICKSTART, topics_path)
    config = agent_config(
        "broker-a.properties",
        namesrv.address,
        forceRegister="false",
        brokerNotActiveTimeoutMillis="1000",  # the NameServer scans every 200 ms
    )
    assert config.force_register is False
    calls: list[Call] = []

    async def scenario() -> None:
        agent = BrokerAgent(config, topic_source(config, topics_path), recording(calls))
        try:
            first = await agent.register_all(force=True)
            assert set(first.responses) == {namesrv.address}
            registered_at = time.monotonic()
            # keep asking for 2.2 s, more than twice the heartbeat timeout
            while time.monotonic() - registered_at < 2.2:
                await asyncio.sleep(0.25)
                result = await agent.register_all(force=config.force_register)
                assert result.skipped
                assert result.responses == {}
            assert kinds(calls).count("register") == 1
            assert kinds(calls).count("query") >= 6
            query = next(c.request for c in calls if c.kind == "query")
            assert query.broker_addr == MASTER_ADDR
            assert (query.data_version.timestamp, query.data_version.counter) == (1551626364371, 3)
            # liveness refreshed by QueryDataVersion: still registered
            assert "broker-a" in await asyncio.to_thread(brokers_of, namesrv.address)

            # a changed topics.json makes the next round register
            write_topics(topics_path, quickstart_plus("AddedTopic"), counter=4)
            changed = await agent.register_all(force=config.force_register)
            assert not changed.skipped
            assert set(changed.responses) == {namesrv.address}
            assert kinds(calls).count("register") == 2
            route = await asyncio.to_thread(route_of, namesrv.address, "AddedTopic")
            assert route is not None
            assert queue_perms(route) == {"broker-a": (2, 2, 6)}
            again = await agent.register_all(force=config.force_register)
            assert again.skipped
        finally:
            await agent.close()

    asyncio.run(scenario())
    # without the agent's rounds the broker expires: the refresh above is what kept it alive
    wait_for(lambda: "broker-a" not in brokers_of(namesrv.address), 5, "broker-a to expire")


# --- S32: compressed body ----------------------------------------------------------------------


def test_s32_compressed_register(namesrv: NamesrvProcess):
    config = agent_config("broker-a.properties", namesrv.address, compressedRegister="true")
    calls: list[Call] = []

    async def scenario() -> RoundResult:
        agent = BrokerAgent(config, topic_source(config), recording(calls))
        try:
            return await agent.register_all(force=True)
        finally:
            await agent.close()

    result = asyncio.run(scenario())
    assert set(result.responses) == {namesrv.address}
    assert result.errors == {}
    request = calls[0].request
    assert request.compressed is True
    raw = zlib.decompress(request.body)
    assert len(raw) > len(request.body)
    body = decode_body(request.body, request.body_crc32c, compressed=True)
    assert len(body.topic_config_table) == 9
    assert body.data_version.counter == 3
    route = route_of(namesrv.address, "TopicTest")
    assert route is not None
    assert queue_perms(route) == {"broker-a": (4, 4, 6)}


# --- S34: slave learns its master --------------------------------------------------------------


def test_s34_slave_learns_master_addresses(namesrv: NamesrvProcess):
    master = agent_config("broker-a.properties", namesrv.address)
    slave = agent_config("broker-a-s.properties", namesrv.address, listenPort="10921")
    assert (slave.broker_id, slave.broker_addr, slave.ha_server_addr) == (1, SLAVE_ADDR, "127.0.0.1:10922")

    async def scenario() -> tuple[tuple[str, str], tuple[str, str]]:
        slave_agent = BrokerAgent(slave, topic_source(slave))
        master_agent = BrokerAgent(master, topic_source(master))
        try:
            await slave_agent.register_all(force=True)
            before = (slave_agent.master_addr, slave_agent.ha_master_addr)
            # S06: a slave's topics are not carried into the route table
            assert await asyncio.to_thread(route_of, namesrv.address, "TopicTest") is None
            assert set((await master_agent.register_all(force=True)).responses) == {namesrv.address}
            await slave_agent.register_all(force=True)
            after = (slave_agent.master_addr, slave_agent.ha_master_addr)
            assert (master_agent.master_addr, master_agent.ha_master_addr) == ("", "")
            return before, after
        finally:
            await slave_agent.close()
            await master_agent.close()

    before, after = asyncio.run(scenario())
    assert before == ("", "")
    assert after == (MASTER_ADDR, "127.0.0.1:10912")
    route = route_of(namesrv.address, "TopicTest")
    assert route is not None
    assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_ADDR, 1: SLAVE_ADDR}


def test_s34_order_topic_config_is_kept(stubs: Stubs, namesrv: NamesrvProcess):
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4"))
    config = agent_config("broker-a.properties", namesrv.address)

    async def scenario() -> dict[str, str]:
        agent = BrokerAgent(config, topic_source(config))
        try:
            result = await agent.register_all(force=True)
            assert dict(result.responses[namesrv.address].kv_table) == {"TopicTest": "broker-a:4"}
            return agent.order_topic_config
        finally:
            await agent.close()

    assert asyncio.run(scenario()) == {"TopicTest": "broker-a:4"}


# --- S35: broker permission ---------------------------------------------------------------------


def test_s35_read_only_broker_registers_perm_4(namesrv: NamesrvProcess):
    config = agent_config("broker-a.properties", namesrv.address, brokerPermission="4")
    result = asyncio.run(one_round(config))
    assert set(result.responses) == {namesrv.address}
    for topic in ("TopicTest", "TBW102", "DefaultCluster", "%RETRY%please_rename_unique_group_name_4"):
        route = route_of(namesrv.address, topic)
        assert route is not None, topic
        assert [q.perm for q in route.queue_datas] == [4], topic
    assert queue_perms(route_of(namesrv.address, "TopicTest")) == {"broker-a": (4, 4, 4)}


# --- S36: unregister ---------------------------------------------------------------------------


def test_s36_unregister_all_removes_the_route(namesrv: NamesrvProcess):
    config = agent_config("broker-b.properties", namesrv.address)

    async def scenario() -> dict[str, str]:
        agent = BrokerAgent(config, topic_source(config))
        try:
            await agent.register_all(force=True)
            route = await asyncio.to_thread(route_of, namesrv.address, "TopicTest")
            assert route is not None
            assert queue_perms(route) == {"broker-b": (4, 4, 6)}
            return await agent.unregister_all()
        finally:
            await agent.close()

    assert asyncio.run(scenario()) == {}
    assert route_of(namesrv.address, "TopicTest") is None
    assert "broker-b" not in brokers_of(namesrv.address)
    assert all_topics(namesrv.address) == []


# --- S30: schedule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "expected"),
    [(1, 10_000), (5_000, 10_000), (10_000, 10_000), (30_000, 30_000), (60_000, 60_000), (90_000, 60_000)],
)
def test_s30_registration_period(period: int, expected: int):
    assert registration_period_millis(period) == expected


def test_s30_run_registers_periodically_follows_topics_and_unregisters(tmp_path: Path, namesrv: NamesrvProcess):
    topics_path = tmp_path / "topics.json"
    shutil.copyfile(QUICKSTART, topics_path)
    config = agent_config("broker-a.properties", namesrv.address)  # period 30 000 ms -> 0.3 s scaled
    calls: list[Call] = []

    def registers() -> list[Call]:
        return [c for c in calls if c.kind == "register"]

    async def scenario() -> float:
        agent = BrokerAgent(config, topic_source(config, topics_path), recording(calls))
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(agent.run(stop, sleep_unit=0.01))
        try:
            deadline = time.monotonic() + 10
            while len(registers()) < 3:
                assert time.monotonic() < deadline, f"only {len(registers())} registrations"
                assert not task.done()
                await asyncio.sleep(0.02)
            route = await asyncio.to_thread(route_of, namesrv.address, "TopicTest")
            assert route is not None

            write_topics(topics_path, quickstart_plus("LateTopic"), counter=4)
            await asyncio.to_thread(
                poll_until, lambda: "LateTopic" in all_topics(namesrv.address), 5 + LOADED_BOX_SLACK_SECONDS, 0.05
            )
            assert registers()[-1].address == namesrv.address
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await agent.close()
        return started

    started = asyncio.run(scenario())
    times = [c.at for c in registers()]
    assert times[0] - started < LOADED_BOX_SLACK_SECONDS  # at start
    assert times[1] - times[0] >= 0.1 * 0.9  # first periodic round 10 s (scaled) after start
    assert times[2] - times[1] >= 0.3 * 0.9  # then every registerNameServerPeriod (scaled)
    assert kinds(calls)[-1] == "unregister"
    assert kinds(calls).count("query") == 0  # forceRegister defaults to true
    assert route_of(namesrv.address, "TopicTest") is None
    assert route_of(namesrv.address, "LateTopic") is None


def test_s37_run_sends_a_topics_change_before_the_next_periodic_round(tmp_path: Path, namesrv: NamesrvProcess):
    """topics.json is polled between rounds (every second); a change is registered at once, long
    before the first periodic round (10 s after start). request_round (SIGHUP) too. Real seconds
    (sleep_unit 1.0), so that a loaded machine has 10 s before the periodic round could blur it."""
    topics_path = tmp_path / "topics.json"
    shutil.copyfile(QUICKSTART, topics_path)
    config = agent_config("broker-a.properties", namesrv.address)
    calls: list[Call] = []

    def registers() -> list[Call]:
        return [c for c in calls if c.kind == "register"]

    async def wait_registers(count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(registers()) < count:
            assert time.monotonic() < deadline, f"{len(registers())} registrations, expected {count}"
            await asyncio.sleep(0.02)

    async def scenario() -> float:
        agent = BrokerAgent(config, topic_source(config, topics_path), recording(calls))
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(agent.run(stop, sleep_unit=1.0))
        try:
            await wait_registers(1, 4)
            write_topics(topics_path, quickstart_plus("LateTopic"), counter=4)
            await wait_registers(2, 4)
            body = decode_body(registers()[1].request.body, registers()[1].request.body_crc32c, compressed=False)
            assert "LateTopic" in body.topic_config_table
            assert body.data_version.counter == 4
            # the call is recorded as it is sent: its answer (the topic in the table) may come later
            await asyncio.to_thread(
                poll_until, lambda: "LateTopic" in all_topics(namesrv.address), 4 + LOADED_BOX_SLACK_SECONDS, 0.05
            )
            agent.request_round()
            await wait_registers(3, 4)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await agent.close()
        return started

    started = asyncio.run(scenario())
    times = [c.at for c in registers()]
    assert len(times) == 3
    assert times[2] - started < 10 * 0.95, "the changes waited for the periodic round"
    assert kinds(calls)[-1] == "unregister"


class HangingClient:
    """A NameServer client that never returns and ignores its timeout."""

    def __init__(self, address: str) -> None:
        self.address = address

    async def _hang(self) -> Any:
        await asyncio.Event().wait()

    async def register_broker(self, request: Any, timeout: float) -> Any:
        return await self._hang()

    async def unregister_broker(self, request: Any, timeout: float) -> None:
        await self._hang()

    async def query_data_version(self, request: Any, timeout: float) -> Any:
        return await self._hang()

    async def close(self) -> None:
        return None


def test_s33_round_is_bounded_even_when_a_client_ignores_its_deadline(namesrv: NamesrvProcess):
    hanging = "127.0.0.1:1"
    config = agent_config(
        "broker-a.properties",
        f"{hanging};{namesrv.address}",
        registerBrokerTimeoutMills="300",
        forceRegister="false",
    )

    def factory(address: str) -> Any:
        return HangingClient(address) if address == hanging else GrpcNamesrvClient(address)

    async def scenario() -> tuple[RoundResult, RoundResult, float, dict[str, str]]:
        agent = BrokerAgent(config, topic_source(config), factory)
        try:
            first = await agent.register_all(force=True)
            started = time.monotonic()
            # QueryDataVersion: the real NameServer says unchanged, the other cannot answer
            second = await agent.register_all(force=False)
            elapsed = time.monotonic() - started
            return first, second, elapsed, await agent.unregister_all()
        finally:
            await agent.close()

    async def bounded() -> tuple[RoundResult, RoundResult, float, dict[str, str]]:
        return await asyncio.wait_for(scenario(), 10)

    first, second, elapsed, unregister_errors = asyncio.run(bounded())
    assert set(first.responses) == {namesrv.address}
    assert "DEADLINE_EXCEEDED" in first.errors[hanging]
    assert not second.skipped  # a NameServer that cannot answer QueryDataVersion means: register (S31)
    assert set(second.responses) == {namesrv.address}
    assert set(second.errors) == {hanging}
    # two steps of 0.3 s each, bounded by the agent itself (the client would wait forever)
    assert elapsed < 2 * 0.3 + LOADED_BOX_SLACK_SECONDS, f"two bounded steps took {elapsed:.2f} s"
    assert set(unregister_errors) == {hanging}
    assert route_of(namesrv.address, "TopicTest") is None


# --- the broker-agent command ------------------------------------------------------------------


def sigterm(agent: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """SIGTERM the agent and collect its output; killed when it does not exit within ``timeout`` s."""
    agent.send_signal(signal.SIGTERM)
    try:
        return agent.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        agent.kill()
        return agent.communicate(timeout=5)


def test_s36_cli_end_to_end_sigterm_unregisters(namesrv: NamesrvProcess):
    with socket.socket() as probe:  # --on-stop auto: a broker listening there would be handed over
        assert probe.connect_ex(("127.0.0.1", 10911)) != 0, f"something listens on {MASTER_ADDR}"
    agent = spawn_agent(
        "--broker-config", str(fixture_path("broker-a.properties")),
        "--topics-json", str(QUICKSTART),
        "--namesrv-addr", namesrv.address,
        "--set", "brokerIP1=127.0.0.1",
    )  # fmt: skip
    try:
        wait_for(lambda: route_of(namesrv.address, "TopicTest") is not None, 15, "the agent's route")
        route = route_of(namesrv.address, "TopicTest")
        assert queue_perms(route) == {"broker-a": (4, 4, 6)}
        assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_ADDR}

        # SIGHUP forces a round at once (well before the first periodic round 10 s after start)
        with namesrv.channel() as channel:
            Stubs(channel).ns.UnregisterBroker(
                ns_pb2.UnregisterBrokerRequest(
                    cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr=MASTER_ADDR
                )
            )
        assert route_of(namesrv.address, "TopicTest") is None
        agent.send_signal(signal.SIGHUP)
        wait_for(lambda: route_of(namesrv.address, "TopicTest") is not None, 5, "the route after SIGHUP")

    finally:
        out, err = sigterm(agent, 15)
    assert agent.returncode == 0, err
    assert "Traceback" not in err
    assert "broker-agent: stopped" in out
    assert route_of(namesrv.address, "TopicTest") is None
    assert "broker-a" not in brokers_of(namesrv.address)


def test_s36_sigterm_while_the_broker_runs_hands_the_session_over(namesrv: NamesrvProcess) -> None:
    """The agent alone stops (a restart, an upgrade) while its broker's port still accepts
    connections: it hands its session over instead of unregistering, and the route stays; the next
    agent takes over, and once the broker is gone that one's SIGTERM unregisters (S36)."""
    broker = socket.create_server(("127.0.0.1", 0))  # the running broker's listen port
    port = broker.getsockname()[1]
    metrics_port = free_port()
    args = (
        "--broker-config", str(fixture_path("broker-a.properties")), "--topics-json", str(QUICKSTART),
        "--namesrv-addr", namesrv.address, "--set", "brokerIP1=127.0.0.1", "--set", f"listenPort={port}",
        "--metrics-port", str(metrics_port),
    )  # fmt: skip

    def session_open() -> bool:
        state = scrape(f"http://127.0.0.1:{metrics_port}/metrics").total("broker_agent_session_state")
        return state == SESSION_STATES["open"]

    def run_and_stop() -> str:
        agent = spawn_agent(*args)
        try:
            wait_for(lambda: route_of(namesrv.address, "TopicTest") is not None, 15, "the agent's route")
            wait_for(session_open, 15, "the agent's session")
        finally:
            out, err = sigterm(agent, 30)
        assert agent.returncode == 0, err
        assert "broker-agent: stopped" in out
        return err

    try:
        err = run_and_stop()
        assert "sessions handed over to 1/1 NameServers, not unregistered" in err, err
        time.sleep(0.5)
        route = route_of(namesrv.address, "TopicTest")
        assert route is not None, "a restarted agent's broker left the routes"
        assert dict(route.broker_datas[0].broker_addrs) == {0: f"127.0.0.1:{port}"}
    finally:
        broker.close()
    err = run_and_stop()  # the broker is gone now: unregistered
    assert "unregistered from 1/1 NameServers" in err, err
    assert route_of(namesrv.address, "TopicTest") is None


def run_agent_with(
    tmp_path: Path, conf: str, topics: Path = QUICKSTART
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    path = tmp_path / "broker.conf"
    path.write_text(conf, encoding="utf-8")
    result = run_cli("broker_agent", "--broker-config", str(path), "--topics-json", str(topics), timeout=20)
    return path, result


BASE_CONF = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerRole=ASYNC_MASTER\n"


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        (BASE_CONF + "brokerId=${brokerId}\nnamesrvAddr=127.0.0.1:9876\n", "brokerId"),
        (BASE_CONF + "brokerId=abc\nnamesrvAddr=127.0.0.1:9876\n", "brokerId"),
        (BASE_CONF + "brokerId=0\nnamesrvAddr=127.0.0.1\n", "namesrvAddr"),
    ],
    ids=["placeholder", "non-numeric-id", "addr-without-port"],
)
def test_s37_cli_bad_broker_conf_exits_2(tmp_path: Path, conf: str, key: str):
    path, result = run_agent_with(tmp_path, conf)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
    assert key in lines[0]
    assert result.stdout == ""


def test_s37_cli_broken_topics_json_exits_2(tmp_path: Path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"topicConfigTable": {"TopicTest": {"perm": 16}}}', encoding="utf-8")
    _, result = run_agent_with(tmp_path, BASE_CONF + "brokerId=0\nnamesrvAddr=127.0.0.1:9876\n", topics)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(topics) in lines[0]
    assert "TopicTest" in lines[0]
    assert "perm" in lines[0]
