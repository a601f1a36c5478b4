"""RocketMQ 5.x zones (S39) and static topics (S40) with the real thing: Java RocketMQ 5.5.0 brokers
registered with our NameServer, Java 5.5.0 clients using our routes.

- Zones: two brokers started with ``ROCKETMQ_ZONE=zone-a`` / ``zone-b`` (their registrations carry
  ``__ZONE_NAME``); a producer started with ``ROCKETMQ_ZONE=zone-a`` and ``ROCKETMQ_ZONE_MODE=true``
  (read by RocketMQ's ``DynamicalExtFieldRPCHook``) sends only to its zone's broker; one without
  zone mode to both.
- Static topics: ``mqadmin updateStaticTopic`` maps 4 logic queues onto the same two brokers; they
  register the mappings, our routes return them, and a producer sends to the 4 logic queues (which a
  client only knows from the route's ``topicQueueMappingByBroker``) and a push consumer reads every
  message back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.wire import fastjson
from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import (
    ROCKETMQ_5,
    JavaClient,
    java_processes,
    mqadmin,
    require_rocketmq,
    start_java_broker,
    wait_registered,
)
from tests.support import NamesrvProcess, Stubs, running_namesrv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    require_rocketmq(ROCKETMQ_5)


def route(namesrv_addr: str, topic: str, **ext: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC over remoting (with ``ext`` fields), decoded; None when not found."""
    with RemotingTestClient(namesrv_addr) as client:
        answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext})
    if answer.code != 0:
        return None
    data: dict[str, Any] = fastjson.loads(answer.body)
    return data


def broker_names(found: dict[str, Any] | None) -> list[str]:
    return sorted(b["brokerName"] for b in (found or {}).get("brokerDatas", []))


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.25)


def send(namesrv_addr: str, topic: str, count: int, workdir: Path, env: dict[str, str] | None = None) -> list[str]:
    """The SENT lines of a Java DefaultMQProducer sending ``count`` messages (all must succeed)."""
    producer = JavaClient(ROCKETMQ_5, "Producer", namesrv_addr, "pg-5x", topic, workdir=workdir, env=env)
    try:
        producer.read_until("STARTED")
        producer.send(f"send {count} {workdir.name}")
        lines = producer.read_until("DONE")
        assert lines[-1] == f"DONE sent={count} failed=0", "\n".join(producer.lines())
        return [line for line in lines if line.startswith("SENT ")]
    finally:
        producer.close()


@pytest.fixture(scope="module")
def zoned_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    """Our NameServer with two Java 5.5.0 brokers registered, ``broker-za`` in ``zone-a`` and
    ``broker-zb`` in ``zone-b`` (``ROCKETMQ_ZONE``), both in ``DefaultCluster``: the module's two
    tests share them (each uses its own topic), two broker start-ups fewer (~10 CPU-s each)."""
    work = tmp_path_factory.mktemp("zoned")
    with running_namesrv(work / "ns") as namesrv, java_processes() as procs:
        addr = namesrv.remoting_address
        for name, zone in (("broker-za", "zone-a"), ("broker-zb", "zone-b")):
            procs.append(
                start_java_broker(ROCKETMQ_5, work / name, addr, {"brokerName": name}, env={"ROCKETMQ_ZONE": zone})
            )
        # mqadmin creates a topic on the brokers our cluster info lists: both must be in it first
        # (a Java broker's first registration arrives after its boot line)
        for name in ("broker-za", "broker-zb"):
            wait_registered(addr, name, timeout=90)
        yield namesrv


def test_s39_zone_mode_java_clients_get_only_their_zones_brokers(tmp_path: Path, zoned_cluster: NamesrvProcess) -> None:
    topic = "ZoneTopic"
    namesrv = zoned_cluster
    addr = namesrv.remoting_address
    made = mqadmin(ROCKETMQ_5, addr, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    assert made.returncode == 0, made.stdout + made.stderr
    wait_until(lambda: broker_names(route(addr, topic)) == ["broker-za", "broker-zb"], 90, "both brokers")

    with namesrv.channel() as channel:
        stubs = Stubs(channel)
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=10)
        zones = {name: data.zone_name for name, data in info.broker_addr_table.items()}
        assert zones == {"broker-za": "zone-a", "broker-zb": "zone-b"}  # from __ZONE_NAME, not zoneName
        grpc_route = stubs.ns.PickupTopicRoute(
            ns_pb2.PickupTopicRouteRequest(topic=topic, zone_name="zone-b"), timeout=10
        ).route
        assert [b.broker_name for b in grpc_route.broker_datas] == ["broker-zb"]

    zone_a = {"ROCKETMQ_ZONE": "zone-a", "ROCKETMQ_ZONE_MODE": "true"}
    in_zone = send(addr, topic, 12, tmp_path / "zone-a-producer", zone_a)
    assert {line.split()[2] for line in in_zone} == {"broker-za"}
    everywhere = send(addr, topic, 12, tmp_path / "plain-producer")
    assert {line.split()[2] for line in everywhere} == {"broker-za", "broker-zb"}


def test_s40_static_topic_made_by_mqadmin_is_produced_and_consumed_through_our_routes(
    tmp_path: Path, zoned_cluster: NamesrvProcess
) -> None:
    topic = "StaticTopic5x"
    namesrv = zoned_cluster
    addr = namesrv.remoting_address
    assert len(fastjson.loads(cluster_info(addr))["brokerAddrTable"]) == 2
    made = mqadmin(ROCKETMQ_5, addr, "updateStaticTopic", "-t", topic, "-qn", "4", "-c", "DefaultCluster", timeout=180)
    assert made.returncode == 0, made.stdout + made.stderr

    def mapped() -> bool:
        found = route(addr, topic)
        return found is not None and sorted(found.get("topicQueueMappingByBroker") or {}) == [
            "broker-za",
            "broker-zb",
        ]

    wait_until(mapped, 90, "the static topic's mappings in our route")
    found = route(addr, topic)
    assert found is not None
    mappings = found["topicQueueMappingByBroker"]
    assert {m["totalQueues"] for m in mappings.values()} == {4}
    logic_ids = sorted(int(k) for m in mappings.values() for k in m["currIdMap"])
    assert logic_ids == [0, 1, 2, 3]
    with namesrv.channel() as channel:
        grpc_route = Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=10)
        assert sorted(grpc_route.route.topic_queue_mapping_by_broker) == ["broker-za", "broker-zb"]

    sent = send(addr, topic, 20, tmp_path / "static-producer")
    # The client sends to the 4 logic queues, each on the broker the mapping names (it sees them
    # only in the route's topicQueueMappingByBroker; without them it would see 2 physical queues,
    # ids 0 and 1, per broker).
    owner = {int(k): bname for bname, m in mappings.items() for k in m["currIdMap"]}
    assert {(line.split()[2], int(line.split()[3])) for line in sent} == {(b, q) for q, b in owner.items()}

    consumer = JavaClient(ROCKETMQ_5, "PushConsumer", addr, "cg-static-5x", topic, workdir=tmp_path / "consumer")
    try:
        consumer.read_until("STARTED")
        received: set[str] = set()
        deadline = time.monotonic() + 120
        while len(received) < 20 and time.monotonic() < deadline:
            line = consumer.read_until("RECV", timeout=max(1.0, deadline - time.monotonic()))[-1]
            received.add(line.split()[1])
        assert received == {f"static-producer-{i}" for i in range(20)}
    finally:
        consumer.close()


def cluster_info(namesrv_addr: str) -> bytes:
    with RemotingTestClient(namesrv_addr) as client:
        answer = client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    return answer.body if answer.code == 0 else b'{"brokerAddrTable":{}}'
