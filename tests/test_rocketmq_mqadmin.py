"""``mqadmin`` (RocketMQ 5.5.0 and 4.9.7 tools) against our NameServer prints what it prints against the
Java 5.5.0 NameServer. One Java broker of each version registers with both NameServers; the same
script of commands runs against each (one JVM per NameServer, both at once,
``tests/rocketmq/java/MqadminBatch.java``), and each command's output is compared after replacing
only the NameServer's address (and, for ``clusterList``, the broker's live statistics). Differences we
mean are listed in docs/compatibility.md and named in :data:`CONFIG_DIFFERENCES` and
:func:`test_topic_list_prints_the_same_topics`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    JavaProcess,
    cluster_info,
    java_processes,
    mqadmin_batch,
    require_rocketmq,
    start_java_broker,
    start_java_namesrv,
    wait_registered,
)
from tests.support import NamesrvProcess, running_namesrv

pytestmark = pytest.mark.slow

TOPIC = "CmpTopic"
ORDER_TOPIC = "CmpOrderTopic"  # a topic no broker has: its ORDER_TOPIC_CONFIG changes no broker's DataVersion

SCRIPT: list[tuple[str, ...]] = [
    ("clusterList",),
    ("topicRoute", "-t", TOPIC),
    ("topicList",),
    ("topicRoute", "-t", "NoSuchTopic"),
    ("updateKvConfig", "-s", "cmp-namespace", "-k", "cmp-key", "-v", "cmp-value"),
    ("updateOrderConf", "-t", ORDER_TOPIC, "-m", "put", "-v", "cmp-a:4;cmp-b:4"),
    ("updateOrderConf", "-t", ORDER_TOPIC, "-m", "get"),
    ("updateOrderConf", "-t", ORDER_TOPIC, "-m", "delete"),
    ("updateOrderConf", "-t", ORDER_TOPIC, "-m", "get"),
    ("deleteKvConfig", "-s", "cmp-namespace", "-k", "cmp-key"),
    ("wipeWritePerm", "-b", "cmp-a"),
    ("topicRoute", "-t", TOPIC),
    ("addWritePerm", "-b", "cmp-a"),
    ("topicRoute", "-t", TOPIC),
    ("getNamesrvConfig",),
    ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
    ("getNamesrvConfig",),
    ("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/elsewhere.json"),
    ("deleteTopic", "-t", TOPIC, "-c", "DefaultCluster"),
    ("topicRoute", "-t", TOPIC),
]
"""The commands, in order; each runs against our NameServer and against the Java one."""

SCRIPT_4X: list[tuple[str, ...]] = [("clusterList",), ("topicRoute", "-t", TOPIC), ("topicList",)]
"""What 4.9.7's mqadmin runs (it asks for routes as a 4.9.4+ client: standard JSON)."""

CONFIG_DIFFERENCES = {
    "kvConfigPath": "a path of each server's own work directory",
    "configStorePath": "a path of each server's own work directory",
    "listenPort": "each server's own port (ours prints the configured one: 0 = chosen by the OS)",
    "bindAddress": "ours is started with --host 127.0.0.1; Java binds 0.0.0.0",
    "rocketmqHome": "Java prints its ROCKETMQ_HOME; ours has none (the key is accepted and does nothing): empty",
    "writeBufferHighWaterMark": "ours prints the effective 65536; Java prints 0, meaning Netty's default (64 KiB)",
    "writeBufferLowWaterMark": "ours prints the effective 32768; Java prints 0, meaning Netty's default (32 KiB)",
}
"""getNamesrvConfig keys both servers print with values that differ on purpose (docs/compatibility.md)."""


@dataclass
class Outputs:
    ours: NamesrvProcess
    java: JavaProcess
    brokers: list[JavaProcess]
    script: list[tuple[str, str]]
    """(ours, java) output of each command of :data:`SCRIPT`."""
    script_4x: list[tuple[str, str]]
    """(ours, java) output of each command of :data:`SCRIPT_4X` (4.9.7's mqadmin)."""
    seconds: float


def _both(
    version: str, script: list[tuple[str, ...]], ours: NamesrvProcess, java: JavaProcess, work: Path
) -> list[tuple[str, str]]:
    """Run ``script`` against both NameServers at once; outputs with the NameServer address replaced."""

    def run(addr: str, name: str) -> list[str]:
        outputs = mqadmin_batch(version, [(*cmd, "-n", addr) for cmd in script], workdir=work / f"{name}-{version}")
        return [out.replace(addr, "<namesrv>") for out in outputs]

    with ThreadPoolExecutor(2) as pool:
        mine = pool.submit(run, ours.remoting_address, "ours")
        theirs = pool.submit(run, java.addr, "java")
        return list(zip(mine.result(), theirs.result(), strict=True))


def _route_queue_brokers(addr: str, topic: str) -> set[str]:
    from namesrv_grpc.wire.fastjson import loads

    with RemotingTestClient(addr) as client:
        answer = client.call(105, {"topic": topic})
    return {q["brokerName"] for q in loads(answer.body)["queueDatas"]} if answer.code == 0 else set()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outputs]:
    require_rocketmq(ROCKETMQ_5, ROCKETMQ_4)
    work = tmp_path_factory.mktemp("mqadmin-compare")
    with running_namesrv(work / "ours") as ours, java_processes() as procs:
        started = time.monotonic()
        java = start_java_namesrv(ROCKETMQ_5, work / "java")
        procs.append(java)
        both = f"{ours.remoting_address};{java.addr}"
        procs.append(start_java_broker(ROCKETMQ_5, work / "cmp-a", both, {"brokerName": "cmp-a"}))
        procs.append(start_java_broker(ROCKETMQ_4, work / "cmp-b", both, {"brokerName": "cmp-b"}))
        for addr in (ours.remoting_address, java.addr):
            wait_registered(addr, "cmp-a")
            wait_registered(addr, "cmp-b")
        # The topic is created on both brokers (through our NameServer's cluster info), which then
        # register it with both NameServers.
        (created,) = mqadmin_batch(
            ROCKETMQ_5,
            [("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2", "-n", ours.remoting_address)],
            workdir=work / "create",
        )
        assert created.count("success") == 2, created
        deadline = time.monotonic() + 60
        while not all(_route_queue_brokers(a, TOPIC) == {"cmp-a", "cmp-b"} for a in (ours.remoting_address, java.addr)):
            assert time.monotonic() < deadline, "the brokers did not register the new topic with both NameServers"
            time.sleep(0.2)
        script_4x = _both(ROCKETMQ_4, SCRIPT_4X, ours, java, work)
        script = _both(ROCKETMQ_5, SCRIPT, ours, java, work)
        yield Outputs(ours, java, procs[1:], script, script_4x, time.monotonic() - started)


def _output(outputs: Outputs, *command: str, nth: int = 0) -> tuple[str, str]:
    indexes = [i for i, cmd in enumerate(SCRIPT) if cmd == command]
    return outputs.script[indexes[nth]]


_LIVE_STATS = re.compile(r"\d+-\d+\([^)]*\)|\d+\.\d+(\(\d+,\d+ms(\|\d+,\d+ms)?\))?")


def test_cluster_list_is_the_same(outputs: Outputs) -> None:
    """Every column comes from our cluster info (names, ids, addresses, version) except the live
    statistics mqadmin asks each broker for (TPS, timer progress, hours since the oldest message),
    normalised here."""
    mine, theirs = _output(outputs, "clusterList")
    assert "cmp-a" in mine
    assert "V4_9_7" in mine
    assert _LIVE_STATS.sub("<stat>", mine) == _LIVE_STATS.sub("<stat>", theirs)
    mine4, theirs4 = outputs.script_4x[0]
    assert "cmp-b" in mine4
    assert _LIVE_STATS.sub("<stat>", mine4) == _LIVE_STATS.sub("<stat>", theirs4)


def test_topic_route_is_the_same(outputs: Outputs) -> None:
    mine, theirs = _output(outputs, "topicRoute", "-t", TOPIC)
    assert '"brokerName":"cmp-b"' in mine
    assert mine == theirs
    assert outputs.script_4x[1][0] == outputs.script_4x[1][1]


def test_an_unknown_topic_fails_the_same(outputs: Outputs) -> None:
    mine, theirs = _output(outputs, "topicRoute", "-t", "NoSuchTopic")
    assert "No topic route info in name server for the topic: NoSuchTopic" in mine
    assert _strip_stack(mine) == _strip_stack(theirs)


def _strip_stack(text: str) -> str:
    """The exception lines of a stack trace (``at ...`` frames differ only by line of the caller)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("at "))


def test_topic_list_prints_the_same_topics(outputs: Outputs) -> None:
    """The same set of topics; the order is a Java HashSet's iteration order (hash buckets), which
    we do not reproduce (docs/compatibility.md)."""
    mine, theirs = _output(outputs, "topicList")
    assert TOPIC in mine.split()
    assert sorted(mine.splitlines()) == sorted(theirs.splitlines())
    mine4, theirs4 = outputs.script_4x[2]
    assert sorted(mine4.splitlines()) == sorted(theirs4.splitlines())


@pytest.mark.parametrize(
    ("command", "nth"),
    [
        (("updateKvConfig", "-s", "cmp-namespace", "-k", "cmp-key", "-v", "cmp-value"), 0),
        (("updateOrderConf", "-t", ORDER_TOPIC, "-m", "put", "-v", "cmp-a:4;cmp-b:4"), 0),
        (("updateOrderConf", "-t", ORDER_TOPIC, "-m", "get"), 0),
        (("updateOrderConf", "-t", ORDER_TOPIC, "-m", "delete"), 0),
        (("updateOrderConf", "-t", ORDER_TOPIC, "-m", "get"), 1),
        (("deleteKvConfig", "-s", "cmp-namespace", "-k", "cmp-key"), 0),
    ],
    ids=["updateKvConfig", "put-order-conf", "get-order-conf", "delete-order-conf", "get-deleted", "deleteKvConfig"],
)
def test_kv_commands_are_the_same(outputs: Outputs, command: tuple[str, ...], nth: int) -> None:
    mine, theirs = _output(outputs, *command, nth=nth)
    assert _strip_stack(mine) == _strip_stack(theirs)


def test_kv_reads_between_the_writes_saw_them(outputs: Outputs) -> None:
    """``updateOrderConf -m get`` is mqadmin's GET_KV_CONFIG: the value put, then not found."""
    got, _ = _output(outputs, "updateOrderConf", "-t", ORDER_TOPIC, "-m", "get")
    assert "cmp-a:4;cmp-b:4" in got
    gone, _ = _output(outputs, "updateOrderConf", "-t", ORDER_TOPIC, "-m", "get", nth=1)
    assert "cmp-a:4;cmp-b:4" not in gone
    with RemotingTestClient(outputs.ours.remoting_address) as client:
        assert client.call(101, {"namespace": "cmp-namespace", "key": "cmp-key"}).code == 22  # deleted


def test_write_perm_commands_are_the_same(outputs: Outputs) -> None:
    wiped, wiped_java = _output(outputs, "wipeWritePerm", "-b", "cmp-a")
    assert "wipe write perm of broker[cmp-a] in name server[<namesrv>] OK" in wiped
    assert wiped == wiped_java
    route, route_java = _output(outputs, "topicRoute", "-t", TOPIC, nth=1)
    assert '"perm":4' in route  # cmp-a read-only
    assert route == route_java
    added, added_java = _output(outputs, "addWritePerm", "-b", "cmp-a")
    assert added == added_java
    route, route_java = _output(outputs, "topicRoute", "-t", TOPIC, nth=2)
    assert '"perm":4' not in route
    assert route == route_java


def _config(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("="))
    return {k.strip(): v.strip() for k, v in pairs}


def test_get_namesrv_config_agrees_on_every_shared_key(outputs: Outputs) -> None:
    mine_text, theirs_text = _output(outputs, "getNamesrvConfig")
    assert mine_text.splitlines()[0] == theirs_text.splitlines()[0] == "============<namesrv>============"
    mine, theirs = _config(mine_text), _config(theirs_text)
    shared = set(mine) & set(theirs)
    assert {"orderMessageEnable", "needWaitForService", "configBlackList", "waitSecondsForService"} <= shared
    assert {k: (mine[k], theirs[k]) for k in shared - set(CONFIG_DIFFERENCES) if mine[k] != theirs[k]} == {}
    assert set(CONFIG_DIFFERENCES) <= shared


def test_update_namesrv_config_is_the_same(outputs: Outputs) -> None:
    done, done_java = _output(outputs, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert "update name server config success" in done
    assert done == done_java
    after, after_java = _output(outputs, "getNamesrvConfig", nth=1)
    assert _config(after)["orderMessageEnable"] == _config(after_java)["orderMessageEnable"] == "true"
    refused, refused_java = _output(outputs, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/elsewhere.json")
    assert _strip_stack(refused) == _strip_stack(refused_java)


def test_delete_topic_is_the_same(outputs: Outputs) -> None:
    deleted, deleted_java = _output(outputs, "deleteTopic", "-t", TOPIC, "-c", "DefaultCluster")
    assert "delete topic [CmpTopic] from NameServer success" in deleted
    assert deleted == deleted_java
    gone, gone_java = _output(outputs, "topicRoute", "-t", TOPIC, nth=3)
    assert "No topic route info" in gone
    assert _strip_stack(gone) == _strip_stack(gone_java)
    info = cluster_info(outputs.ours.remoting_address)
    assert sorted(info["brokerAddrTable"]) == ["cmp-a", "cmp-b"]
