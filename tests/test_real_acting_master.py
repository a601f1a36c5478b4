"""Slave acting master with the real thing (S50-S53): a Java RocketMQ 5.5.0 master and slave with
``enableSlaveActingMaster=true`` behind a NameServer with ``supportActingMaster`` and
``notifyMinBrokerIdChanged`` on, ours and (the judge) the Java 5.5.0 NameServer, the same scenario
for both. The master is killed with SIGKILL: the NameServer clears the write bit, shows the slave
under id 0 and tells the slave at once (its log says "min broker id changed"), and a Java consumer
reads every message from the slave acting as master. When the master comes back the slave is told
again and the routes are writable again."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.core.model import PERM_WRITE
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.wire import fastjson
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import (
    ROCKETMQ_5,
    JavaClient,
    JavaProcess,
    java_processes,
    mqadmin,
    require_rocketmq,
    start_java_broker,
    start_java_namesrv,
    wait_registered,
)
from tests.support import running_namesrv

pytestmark = pytest.mark.slow

TOPIC = "ActingMasterTopic"
ACTING = {"enableSlaveActingMaster": "true", "brokerName": "broker-acting"}
"""Both brokers; the slave also needs ``slaveReadEnable=true``, or a 5.x slave refuses pulls
(``PullMessageProcessor.rejectRequest``: ``[REJECTREQUEST]system busy``) whoever acts as master."""
UPDATE_AND_CREATE_TOPIC, GET_ALL_TOPIC_CONFIG, GET_MAX_OFFSET = 17, 21, 30
"""Broker request codes (RocketMQ ``RequestCode``), sent to the slave directly."""
NOTIFIED = "min broker id changed"
"""What a 5.x broker logs for every NOTIFY_MIN_BROKER_ID_CHANGE (``AdminBrokerProcessor``)."""


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    require_rocketmq(ROCKETMQ_5)


@pytest.fixture(params=["ours", "java"])
def namesrv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """``(remoting address, metrics port or 0)`` of a NameServer with both switches on."""
    if request.param == "java":
        with java_processes() as procs:
            procs.append(
                start_java_namesrv(
                    ROCKETMQ_5, tmp_path / "java-ns", supportActingMaster="true", notifyMinBrokerIdChanged="true"
                )
            )
            yield procs[0].addr, 0
        return
    conf = tmp_path / "namesrv.conf"
    conf.write_text("supportActingMaster=true\nnotifyMinBrokerIdChanged=true\n")
    port = free_port()
    with running_namesrv(tmp_path / "ns", "-c", str(conf), "--metrics-port", str(port)) as server:
        yield server.remoting_address, port


def route(namesrv_addr: str) -> tuple[dict[int, str], int] | None:
    """``(brokerAddrs, perm)`` of the topic's only broker name, over remoting; None when not found."""
    with RemotingTestClient(namesrv_addr) as client:
        answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    if answer.code != 0:
        return None
    data: dict[str, Any] = fastjson.loads(answer.body)
    if not data["brokerDatas"] or not data["queueDatas"]:
        return None
    addrs = {int(k): v for k, v in data["brokerDatas"][0]["brokerAddrs"].items()}
    return addrs, data["queueDatas"][0]["perm"]


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.25)


def slave_has_messages(slave: JavaProcess, count: int) -> bool:
    with RemotingTestClient(slave.addr) as client:
        topics = client.call(GET_ALL_TOPIC_CONFIG)
        if topics.code != 0 or TOPIC.encode() not in topics.body:
            return False
        total = 0
        for queue_id in range(4):
            answer = client.call(GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue_id)})
            if answer.code != 0:
                return False
            total += int(answer.ext_fields.get("offset", "0"))
        return total >= count


def create_topic_on(slave: JavaProcess) -> None:
    """The topic on the slave as ``mqadmin updateTopic -b <slave>`` makes it (UPDATE_AND_CREATE_TOPIC;
    a 5.5.0 broker takes it whatever its role). A slave would copy it from its master by itself, but
    RocketMQ 5.5.0's ``SlaveSynchronize.syncAll`` first runs 60 s after the slave starts
    (``BrokerController``: ``lastSyncTimeMs`` is set at construction), and the test waited for it."""
    fields = {
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    with RemotingTestClient(slave.addr) as client:
        answer = client.call(UPDATE_AND_CREATE_TOPIC, fields)
    assert answer.code == 0, answer.remark


def times_notified(broker: JavaProcess) -> int:
    return sum(log.read_text(errors="replace").count(NOTIFIED) for log in broker.workdir.glob("logs/**/*.log"))


def test_kill_master_consumer_reads_from_acting_slave(namesrv: tuple[str, int], tmp_path: Path) -> None:
    addr, metrics_port = namesrv
    with java_processes() as procs:
        master = start_java_broker(ROCKETMQ_5, tmp_path / "master", addr, dict(ACTING))
        procs.append(master)
        # the master first: a slave registered before it would be told of the new smallest id (S53)
        # when the master's first registration arrives, which this test counts as a notification
        wait_registered(addr, ACTING["brokerName"], 0, timeout=90)
        slave = start_java_broker(
            ROCKETMQ_5,
            tmp_path / "slave",
            addr,
            {**ACTING, "brokerId": "1", "brokerRole": "SLAVE", "slaveReadEnable": "true"},
        )
        procs.append(slave)
        made = mqadmin(ROCKETMQ_5, addr, "updateTopic", "-b", master.addr, "-t", TOPIC, "-r", "4", "-w", "4")
        assert made.returncode == 0, made.stdout + made.stderr
        create_topic_on(slave)
        wait_until(lambda: (route(addr) or ({}, 0))[0] == {0: master.addr, 1: slave.addr}, 90, "master and slave")

        producer = JavaClient(ROCKETMQ_5, "Producer", addr, "acting-pg", TOPIC, workdir=tmp_path / "p")
        try:
            producer.read_until("STARTED")
            producer.send("send 20 before")
            done = producer.read_until("DONE")[-1]
            assert done == "DONE sent=20 failed=0", "\n".join(producer.lines())
        finally:
            producer.close()
        # the slave has the topic (above) and every message (asynchronous replication) before the
        # master dies
        wait_until(lambda: slave_has_messages(slave, 20), 90, "the slave to hold the topic and its 20 messages")
        assert times_notified(slave) == 0

        master.kill9()
        acting = ({0: slave.addr}, 4)  # the slave under id 0, READ only (WRITE wiped)
        wait_until(lambda: route(addr) == acting, 30, "the slave shown as acting master, read-only")
        wait_until(lambda: times_notified(slave) == 1, 30, "the slave to be notified")
        if metrics_port:
            metrics = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
            assert metrics.value("namesrv_broker_notifications_total", result="sent") == 1

        consumer = JavaClient(ROCKETMQ_5, "PushConsumer", addr, "acting-cg", TOPIC, workdir=tmp_path / "c")
        try:
            consumer.read_until("STARTED")
            received: set[str] = set()
            deadline = time.monotonic() + 120
            while len(received) < 20 and time.monotonic() < deadline:
                line = consumer.read_until("RECV", timeout=max(1.0, deadline - time.monotonic()))[-1]
                key, broker_name = line.split()[1:3]
                assert broker_name == "broker-acting"
                received.add(key)
            assert received == {f"before-{i}" for i in range(20)}
        finally:
            consumer.close()

        # the master comes back: writable again, the slave told again
        master_again = start_java_broker(ROCKETMQ_5, master.workdir, addr, dict(ACTING))
        procs.append(master_again)

        def master_back() -> bool:
            found = route(addr)
            return found is not None and found[0].get(0) == master_again.addr and bool(found[1] & PERM_WRITE)

        wait_until(master_back, 90, "the master back, writable")
        wait_until(lambda: times_notified(slave) == 2, 30, "the slave to be told the master is back")
