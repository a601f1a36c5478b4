"""Slave acting master (S50-S53) through both front doors of a real ``python -m namesrv_grpc``
process over loopback. Fake brokers listen on the broker addresses that registrations name and
record every remoting frame the NameServer sends them (``NOTIFY_MIN_BROKER_ID_CHANGE``, one-way),
whichever door the broker registered through.

RocketMQ source: ``RouteInfoManager`` (registerBroker, unRegisterBroker, pickupTopicRouteData,
notifyMinBrokerIdChanged), ``NotifyMinBrokerIdChangeRequestHeader`` (the ext fields).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.core.model import PERM_READ, PERM_WRITE, DataVersion
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand
from namesrv_grpc.remoting.codes import FLAG_ONEWAY, NOTIFY_MIN_BROKER_ID_CHANGE, RequestCode, ResponseCode
from namesrv_grpc.wire import bodies, fastjson
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, poll_until, register_request, running_namesrv, topic
from tests.test_watch import Watch

RW = PERM_READ | PERM_WRITE


class FakeBroker:
    """A TCP listener on 127.0.0.1 that records every remoting command it receives."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.received: list[RemotingCommand] = []
        self.connections = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                for command in decoder.feed(data):
                    with self._lock:
                        self.received.append(command)

    def commands(self) -> list[RemotingCommand]:
        with self._lock:
            return list(self.received)

    def wait_for(self, count: int, timeout: float = 10) -> list[RemotingCommand]:
        poll_until(lambda: len(self.commands()) >= count, timeout)
        return self.commands()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def brokers() -> Iterator[list[FakeBroker]]:
    fakes = [FakeBroker() for _ in range(3)]
    yield fakes
    for fake in fakes:
        fake.close()


def start(tmp_path: Path, **keys: str) -> Iterator[NamesrvProcess]:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    port = free_port()
    with running_namesrv(tmp_path / "ns", "-c", str(conf), "--metrics-port", str(port)) as namesrv:
        namesrv.metrics_port = port  # type: ignore[attr-defined]
        yield namesrv


@pytest.fixture
def acting_server(tmp_path: Path) -> Iterator[NamesrvProcess]:
    yield from start(tmp_path, supportActingMaster="true", notifyMinBrokerIdChanged="true")


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[NamesrvProcess]:
    yield from start(tmp_path)


def remoting_register(
    client: RemotingTestClient,
    broker_id: int,
    addr: str,
    *,
    acting: str | None = "true",
    ha: str = "",
    name: str = "broker-a",
    topics: tuple[str, ...] = ("TopicA",),
) -> None:
    # a Java broker's body always holds its system topics: one topic alone would be refused (S42)
    body = bodies.encode_register_broker_body(
        {t: topic(t, perm=RW) for t in (*topics, "SELF_TEST_TOPIC")}, DataVersion(0, 1, 1), compressed=False
    )
    fields = {
        "clusterName": "c1",
        "brokerName": name,
        "brokerId": str(broker_id),
        "brokerAddr": addr,
        "haServerAddr": ha,
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    if acting is not None:
        fields["enableActingMaster"] = acting
    answer = client.call(RequestCode.REGISTER_BROKER, fields, body)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def remoting_route(server: NamesrvProcess, name: str = "TopicA") -> dict:  # type: ignore[type-arg]
    with RemotingTestClient(server.remoting_address) as client:
        answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name})
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    route: dict = fastjson.loads(answer.body)  # type: ignore[type-arg]
    return route


def addrs_and_perm(route: dict) -> tuple[dict[str, str], int]:  # type: ignore[type-arg]
    return {str(k): v for k, v in route["brokerDatas"][0]["brokerAddrs"].items()}, route["queueDatas"][0]["perm"]


def wait(fake: FakeBroker, count: int) -> FakeBroker:
    fake.wait_for(count)
    return fake


def notices(fake: FakeBroker) -> list[dict[str, str]]:
    """Ext fields of the NOTIFY_MIN_BROKER_ID_CHANGE commands a fake broker received (one-way each)."""
    commands = fake.commands()
    assert all(c.code == NOTIFY_MIN_BROKER_ID_CHANGE and c.flag & FLAG_ONEWAY for c in commands), commands
    return [c.ext_fields for c in commands]


def test_s51_s52_s53_remoting_master_connection_close(acting_server: NamesrvProcess, brokers: list[FakeBroker]) -> None:
    """Over remoting: the master's connection closes -> WRITE wiped, slave shown under id 0, both
    slaves told (minBrokerId 1, minBrokerAddr, offlineBrokerAddr); the master comes back -> the
    slaves are told (minBrokerId 0, haBrokerAddr) and the master is not."""
    master, slave1, slave2 = brokers
    m_client = RemotingTestClient(acting_server.remoting_address)
    s_client = RemotingTestClient(acting_server.remoting_address)
    with s_client:
        remoting_register(m_client, 0, master.addr, ha="127.0.0.1:1")
        remoting_register(s_client, 1, slave1.addr)
        remoting_register(s_client, 2, slave2.addr)
        assert addrs_and_perm(remoting_route(acting_server)) == (
            {"0": master.addr, "1": slave1.addr, "2": slave2.addr},
            RW,
        )
        time.sleep(0.3)
        assert [b.commands() for b in brokers] == [[], [], []]  # larger ids arriving: nobody told

        m_client.close()  # S15: the master's connection ends
        expected = {"minBrokerId": "1", "minBrokerAddr": slave1.addr, "offlineBrokerAddr": master.addr}
        slave1.wait_for(1)
        slave2.wait_for(1)
        assert notices(slave1) == [expected]
        assert notices(slave2) == [expected]
        assert addrs_and_perm(remoting_route(acting_server)) == ({"0": slave1.addr, "2": slave2.addr}, PERM_READ)

        with RemotingTestClient(acting_server.remoting_address) as m_again:
            remoting_register(m_again, 0, master.addr, ha="127.0.0.1:2")
            back = {"minBrokerId": "0", "minBrokerAddr": master.addr, "haBrokerAddr": "127.0.0.1:2"}
            slave1.wait_for(2)
            slave2.wait_for(2)
            assert notices(slave1)[1:] == [back]
            assert notices(slave2)[1:] == [back]
            assert addrs_and_perm(remoting_route(acting_server)) == (
                {"0": master.addr, "1": slave1.addr, "2": slave2.addr},
                RW,
            )
            time.sleep(0.3)
            assert master.commands() == []
            metrics = scrape(f"http://127.0.0.1:{acting_server.metrics_port}/metrics")  # type: ignore[attr-defined]
            assert metrics.value("namesrv_broker_notifications_total", result="sent") == 4
            assert metrics.value("namesrv_broker_notifications_total", result="failed") == 0


def test_s51_s53_remoting_unregister(acting_server: NamesrvProcess, brokers: list[FakeBroker]) -> None:
    master, slave1, _ = brokers
    with RemotingTestClient(acting_server.remoting_address) as client:
        remoting_register(client, 0, master.addr)
        remoting_register(client, 1, slave1.addr)
        answer = client.call(
            RequestCode.UNREGISTER_BROKER,
            {"clusterName": "c1", "brokerName": "broker-a", "brokerId": "0", "brokerAddr": master.addr},
        )
        assert answer.code == ResponseCode.SUCCESS
        assert notices(wait(slave1, 1)) == [
            {"minBrokerId": "1", "minBrokerAddr": slave1.addr, "offlineBrokerAddr": master.addr}
        ]
        assert addrs_and_perm(remoting_route(acting_server)) == ({"0": slave1.addr}, PERM_READ)


def test_s50_s53_grpc_registrations_are_told_over_remoting(
    acting_server: NamesrvProcess, brokers: list[FakeBroker]
) -> None:
    """Brokers registered over gRPC get the notification on their broker address over remoting;
    the prime slave's topics enter read-only; routes over gRPC show the acting master."""
    master, slave1, _ = brokers
    with acting_server.channel() as channel:
        stubs = Stubs(channel)
        for broker_id, broker in ((1, slave1), (0, master)):
            request = register_request(
                cluster="c1", broker_id=broker_id, broker_addr=broker.addr, topics=[topic("TopicG", perm=RW)]
            )
            request.enable_acting_master = True
            stubs.ns.RegisterBroker(request, timeout=5)
        # the master arrived after the prime slave: the slave is told
        assert notices(wait(slave1, 1)) == [
            {"minBrokerId": "0", "minBrokerAddr": master.addr, "haBrokerAddr": "127.0.0.1:10912"}
        ]
        stubs.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name="c1", broker_name="broker-a", broker_id=0, broker_addr=master.addr
            ),
            timeout=5,
        )
        slave1.wait_for(2)
        assert notices(slave1)[1] == {
            "minBrokerId": "1",
            "minBrokerAddr": slave1.addr,
            "offlineBrokerAddr": master.addr,
        }
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicG"), timeout=5).route
        assert dict(route.broker_datas[0].broker_addrs) == {0: slave1.addr}
        assert route.queue_datas[0].perm == PERM_READ


def test_old_brokers_untouched(acting_server: NamesrvProcess, brokers: list[FakeBroker]) -> None:
    """Registrations without ``enableActingMaster`` (brokers older than 5.x): the master leaves and
    nothing is wiped, rewritten or sent; over gRPC ``enable_acting_master`` false is the same."""
    master, slave1, slave2 = brokers
    m_client = RemotingTestClient(acting_server.remoting_address)
    with RemotingTestClient(acting_server.remoting_address) as s_client:
        remoting_register(m_client, 0, master.addr, acting=None, name="old-a", topics=("TopicOld",))
        remoting_register(s_client, 1, slave1.addr, acting=None, name="old-a", topics=("TopicOld",))
        m_client.close()
        poll_until(lambda: "0" not in addrs_and_perm(remoting_route(acting_server, "TopicOld"))[0], 10)
        assert addrs_and_perm(remoting_route(acting_server, "TopicOld")) == ({"1": slave1.addr}, RW)
    with acting_server.channel() as channel:
        stubs = Stubs(channel)
        for broker_id, broker in ((0, master), (2, slave2)):
            request = register_request(
                cluster="c1",
                broker_name="old-b",
                broker_id=broker_id,
                broker_addr=broker.addr,
                topics=[topic("TopicOldG")],
            )
            stubs.ns.RegisterBroker(request, timeout=5)
        stubs.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name="c1", broker_name="old-b", broker_id=0, broker_addr=master.addr
            ),
            timeout=5,
        )
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicOldG"), timeout=5).route
        assert dict(route.broker_datas[0].broker_addrs) == {2: slave2.addr}
        assert route.queue_datas[0].perm == RW
    time.sleep(0.5)
    assert [b.commands() for b in brokers] == [[], [], []]


def test_switches_off_by_default(plain_server: NamesrvProcess, brokers: list[FakeBroker]) -> None:
    """Without supportActingMaster and notifyMinBrokerIdChanged: WRITE is still wiped (RocketMQ does
    that whatever the switches say) but routes are not rewritten and nobody is told."""
    master, slave1, _ = brokers
    m_client = RemotingTestClient(plain_server.remoting_address)
    with RemotingTestClient(plain_server.remoting_address) as s_client:
        remoting_register(m_client, 0, master.addr)
        remoting_register(s_client, 1, slave1.addr)
        m_client.close()
        poll_until(lambda: "0" not in addrs_and_perm(remoting_route(plain_server))[0], 10)
        assert addrs_and_perm(remoting_route(plain_server)) == ({"1": slave1.addr}, PERM_READ)
    time.sleep(0.5)
    assert slave1.commands() == []
    assert master.connections == slave1.connections == 0


def test_unreachable_broker_is_counted_not_retried(acting_server: NamesrvProcess) -> None:
    """A broker address nobody listens on: the notification fails fast, is counted, and the
    registration path is not slowed down."""
    dead = f"127.0.0.1:{free_port()}"
    with RemotingTestClient(acting_server.remoting_address) as client:
        remoting_register(client, 1, dead, name="broker-dead")
        started = time.monotonic()
        remoting_register(client, 0, f"127.0.0.1:{free_port()}", name="broker-dead")
        assert time.monotonic() - started < 5
    url = f"http://127.0.0.1:{acting_server.metrics_port}/metrics"  # type: ignore[attr-defined]
    poll_until(lambda: scrape(url).value("namesrv_broker_notifications_total", result="failed") == 1, 10)
    time.sleep(1)
    assert scrape(url).value("namesrv_broker_notifications_total", result="failed") == 1


def test_print_config_lists_the_switches() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "namesrv_grpc", "-p"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "supportActingMaster=false" in out
    assert "notifyMinBrokerIdChanged=false" in out


def test_s51_s52_watchers_see_the_wipe_and_the_acting_master(
    acting_server: NamesrvProcess, brokers: list[FakeBroker]
) -> None:
    """A WatchTopicRoutes stream is pushed the route with the slave under id 0 and the WRITE bit
    gone when the master's connection closes, and the master's route again when it comes back."""
    master, slave1, _ = brokers
    m_client = RemotingTestClient(acting_server.remoting_address)
    with RemotingTestClient(acting_server.remoting_address) as s_client, acting_server.channel() as channel:
        remoting_register(m_client, 0, master.addr, topics=("TopicW",))
        remoting_register(s_client, 1, slave1.addr, topics=("TopicW",))
        watch = Watch(Stubs(channel), ["TopicW"])
        try:
            watch.until(lambda routes: watch_addrs(routes) == {0: master.addr, 1: slave1.addr})
            m_client.close()
            watch.until(lambda routes: watch_addrs(routes) == {0: slave1.addr})
            assert watch.routes["TopicW"] is not None
            assert watch.routes["TopicW"].queue_datas[0].perm == PERM_READ
            with RemotingTestClient(acting_server.remoting_address) as m_again:
                remoting_register(m_again, 0, master.addr, topics=("TopicW",))
                watch.until(lambda routes: watch_addrs(routes) == {0: master.addr, 1: slave1.addr})
                assert watch.routes["TopicW"] is not None
                assert watch.routes["TopicW"].queue_datas[0].perm == RW
        finally:
            watch.cancel()


def watch_addrs(routes: dict[str, types_pb2.TopicRouteData | None]) -> dict[int, str]:
    route = routes.get("TopicW")
    return {} if route is None else dict(route.broker_datas[0].broker_addrs)


def test_s50_remoting_field_absent_is_an_old_broker(acting_server: NamesrvProcess, brokers: list[FakeBroker]) -> None:
    """Over remoting ``enableActingMaster`` absent = a broker older than 5.x: a lone slave's topics
    stay out; present (even ``false``) = 5.x: the lone slave is the prime slave and its topics enter
    (read-only only with ``true``)."""
    with RemotingTestClient(acting_server.remoting_address) as client:
        remoting_register(client, 1, brokers[0].addr, acting=None, name="lone-old", topics=("TopicLoneOld",))
        remoting_register(client, 1, brokers[1].addr, acting="false", name="lone-5x", topics=("TopicLone5x",))
        remoting_register(client, 1, brokers[2].addr, acting="true", name="lone-acting", topics=("TopicLoneActing",))
        missing = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicLoneOld"})
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert addrs_and_perm(remoting_route(acting_server, "TopicLone5x")) == ({"1": brokers[1].addr}, RW)
        assert addrs_and_perm(remoting_route(acting_server, "TopicLoneActing")) == ({"0": brokers[2].addr}, PERM_READ)
