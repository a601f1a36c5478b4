"""Real Java brokers and clients behind our NameServer (remoting): a RocketMQ 5.5.0 master + slave
(broker name ``real-a``) and a 4.9.7 master (``real-b``) register themselves; ``mqadmin updateTopic``
creates a topic on both masters; a Java ``DefaultMQProducer`` sends and a ``DefaultMQPushConsumer``
receives every acknowledged message; ``kill -9`` of the 5.x master removes it from our routes at once
(its connection closes; the broker expiry is 120 s) and the running producer fails over to ``real-b``.

The JVMs (three brokers, one producer, one consumer) start once for the module; the tests run in
file order and build on each other (send, then kill)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.rocketmq_support import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    JavaClient,
    JavaProcess,
    cluster_info,
    java_processes,
    mqadmin,
    require_rocketmq,
    run_java_client,
    start_java_broker,
    wait_registered,
)
from tests.support import NamesrvProcess, running_namesrv

pytestmark = pytest.mark.slow

TOPIC = "RealTopic"
GROUP = "real-consumers"


@dataclass
class Cluster:
    ours: NamesrvProcess
    master5: JavaProcess
    slave5: JavaProcess
    master4: JavaProcess
    workdir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_rocketmq(ROCKETMQ_5, ROCKETMQ_4)
    work = tmp_path_factory.mktemp("real-brokers")
    with running_namesrv(work / "namesrv") as ours, java_processes() as procs:
        ns = ours.remoting_address
        procs.append(start_java_broker(ROCKETMQ_5, work / "a0", ns, {"brokerName": "real-a"}))
        procs.append(
            start_java_broker(
                ROCKETMQ_5, work / "a1", ns, {"brokerName": "real-a", "brokerId": "1", "brokerRole": "SLAVE"}
            )
        )
        procs.append(start_java_broker(ROCKETMQ_4, work / "b0", ns, {"brokerName": "real-b"}))
        for name, broker_id in (("real-a", 0), ("real-a", 1), ("real-b", 0)):
            wait_registered(ns, name, broker_id)
        yield Cluster(ours, procs[0], procs[1], procs[2], work)


@pytest.fixture(scope="module")
def consumer(cluster: Cluster) -> Iterator[JavaClient]:
    client = JavaClient(
        ROCKETMQ_5, "PushConsumer", cluster.ours.remoting_address, GROUP, TOPIC, workdir=cluster.workdir / "consumer"
    )
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[JavaClient]:
    client = JavaClient(
        ROCKETMQ_5,
        "Producer",
        cluster.ours.remoting_address,
        "real-producers",
        TOPIC,
        workdir=cluster.workdir / "producer",
    )
    try:
        client.read_until("STARTED")
        yield client
    finally:
        client.close()


def route_brokers(ns: str, topic: str) -> dict[str, dict[str, str]]:
    """``{brokerName: {brokerId: addr}}`` of our route of ``topic`` (GET_ROUTEINFO_BY_TOPIC as a
    4.9.4+ Java client asks it), ``{}`` when there is none."""
    from namesrv_grpc.wire.fastjson import loads
    from tests.remoting_support import RemotingTestClient

    with RemotingTestClient(ns) as client:
        answer = client.call(105, {"topic": topic})
    if answer.code == 17:
        return {}
    assert answer.code == 0, answer.remark
    route = loads(answer.body)
    queues = {q["brokerName"] for q in route["queueDatas"]}
    return {
        b["brokerName"]: {str(k): v for k, v in b["brokerAddrs"].items()}
        for b in route["brokerDatas"]
        if b["brokerName"] in queues
    }


def wait_for(predicate: object, timeout: float, what: str) -> float:
    """Poll ``predicate()`` every 50 ms until true; returns the seconds it took."""
    start = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def sent_lines(lines: list[str]) -> dict[str, str]:
    """``{key: brokerName}`` of the acknowledged sends among a Producer's output lines."""
    return {parts[1]: parts[2] for parts in (line.split() for line in lines) if parts[0] == "SENT"}


def received_keys(consumer: JavaClient) -> set[str]:
    return {line.split()[1] for line in consumer.lines() if line.startswith("RECV ")}


def test_a_5x_master_and_slave_and_a_4x_master_register(cluster: Cluster) -> None:
    info = cluster_info(cluster.ours.remoting_address)
    assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["real-a", "real-b"]
    assert info["brokerAddrTable"]["real-a"]["brokerAddrs"] == {"0": cluster.master5.addr, "1": cluster.slave5.addr}
    assert info["brokerAddrTable"]["real-b"]["brokerAddrs"] == {"0": cluster.master4.addr}


def test_the_slave_learns_its_master_from_our_register_answer(cluster: Cluster) -> None:
    """A slave's HA client dials the ``haServerAddr`` our REGISTER_BROKER answer gave it (nothing
    else tells it where the master is): the master logs the slave's HA connection."""

    def master_saw_the_slave() -> bool:
        logs = "\n".join(p.read_text(errors="replace") for p in cluster.master5.workdir.glob("logs/**/*.log"))
        return "HAService receive new connection" in logs

    wait_for(master_saw_the_slave, 60, "the slave's HA connection to the master")


def test_mqadmin_update_topic_creates_it_on_both_masters(cluster: Cluster) -> None:
    ns = cluster.ours.remoting_address
    done = mqadmin(
        ROCKETMQ_5,
        ns,
        "updateTopic",
        "-c",
        "DefaultCluster",
        "-t",
        TOPIC,
        "-r",
        "4",
        "-w",
        "4",
        workdir=cluster.workdir / "mqadmin",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "create topic to" in done.stdout
    wait_for(lambda: set(route_brokers(ns, TOPIC)) == {"real-a", "real-b"}, 60, f"{TOPIC} routed to both brokers")


def test_every_acknowledged_message_is_consumed(cluster: Cluster, consumer: JavaClient, producer: JavaClient) -> None:
    consumer.read_until("STARTED")
    producer.send("send 40 before")
    lines = producer.read_until("DONE")
    sent = sent_lines(lines)
    assert lines[-1] == "DONE sent=40 failed=0", lines
    assert set(sent.values()) == {"real-a", "real-b"}  # both versions' masters took messages
    wait_for(lambda: set(sent) <= received_keys(consumer), 120, "every acknowledged message consumed")


def test_a_4x_java_producer_sends_through_our_routes(cluster: Cluster, consumer: JavaClient) -> None:
    done = run_java_client(
        ROCKETMQ_4,
        "Producer",
        cluster.ours.remoting_address,
        "real-producers-4",
        TOPIC,
        workdir=cluster.workdir / "producer4",
        stdin="send 10 v4\nquit\n",
    )
    assert "DONE sent=10 failed=0" in done.stdout, done.stdout + done.stderr[-3000:]
    sent = sent_lines(done.stdout.splitlines())
    wait_for(lambda: set(sent) <= received_keys(consumer), 120, "the 4.9.7 producer's messages consumed")


def test_kill_9_of_a_master_removes_it_at_once_and_the_producer_fails_over(
    cluster: Cluster, consumer: JavaClient, producer: JavaClient
) -> None:
    ns = cluster.ours.remoting_address
    assert route_brokers(ns, TOPIC)["real-a"] == {"0": cluster.master5.addr, "1": cluster.slave5.addr}
    cluster.master5.kill9()
    # The connection close removes the master; the expiry scan (brokerChannelExpiredTime 120 s) could not.
    took = wait_for(
        lambda: "0" not in route_brokers(ns, TOPIC).get("real-a", {}), 20, "the killed master leaves our route"
    )
    assert route_brokers(ns, TOPIC)["real-a"] == {"1": cluster.slave5.addr}  # the slave stays
    assert took < 20
    producer.send("send 30 after")
    lines = producer.read_until("DONE")
    sent = sent_lines(lines)
    assert lines[-1] == "DONE sent=30 failed=0", lines
    assert set(sent.values()) == {"real-b"}
    wait_for(lambda: set(sent) <= received_keys(consumer), 120, "every message sent after the kill consumed")
