"""broker-agent against the real thing: a Java RocketMQ 5.5.0 broker started with ``-c broker.conf``
registers itself with one of our NameServers (remoting) while ``broker-agent``, given that broker's
own ``broker.conf`` and ``store/config/topics.json``, registers its twin with another (gRPC). Every
route a Java client fetches (RocketMQ's NettyRemotingClient, GET_ROUTEINFO_BY_TOPIC as 5.5.0 asks it)
and the cluster info must be byte for byte the same from both. Then the broker stops (it unregisters
itself); the agent keeps the twin registered and the routes stay the same."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.rocketmq_support import (
    ROCKETMQ_5,
    JavaProcess,
    java_processes,
    mqadmin_batch,
    require_rocketmq,
    run_java_client,
    start_java_broker,
    wait_registered,
    wait_unregistered,
)
from tests.support import NamesrvProcess, running_namesrv, spawn_agent

pytestmark = pytest.mark.slow

TOPICS = ("AgentTopic", "AgentOrderTopic")


@dataclass
class Twins:
    by_broker: NamesrvProcess
    by_agent: NamesrvProcess
    broker: JavaProcess
    agent: subprocess.Popen[str]
    workdir: Path


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twins]:
    require_rocketmq(ROCKETMQ_5)
    work = tmp_path_factory.mktemp("agent-real")
    with (
        running_namesrv(work / "ns-broker") as by_broker,
        running_namesrv(work / "ns-agent") as by_agent,
        java_processes() as procs,
    ):
        ns = by_broker.remoting_address
        broker = start_java_broker(ROCKETMQ_5, work / "broker", ns, {"brokerName": "agent-a"})
        procs.append(broker)
        wait_registered(ns, "agent-a")
        created = mqadmin_batch(
            ROCKETMQ_5,
            [
                ("updateTopic", "-b", broker.addr, "-t", TOPICS[0], "-r", "8", "-w", "4", "-p", "6", "-n", ns),
                ("updateTopic", "-b", broker.addr, "-t", TOPICS[1], "-r", "2", "-w", "2", "-o", "true", "-n", ns),
            ],
            workdir=work / "mqadmin",
        )
        assert all("success" in out for out in created), created
        topics_json = broker.workdir / "store" / "config" / "topics.json"
        deadline = time.monotonic() + 60
        while not all(t in (topics_json.read_text() if topics_json.exists() else "") for t in TOPICS):
            assert time.monotonic() < deadline, "the broker did not persist its topics.json"
            time.sleep(0.2)
        agent = spawn_agent(
            "-c", str(broker.workdir / "broker.conf"), "--topics-json", str(topics_json),
            "--namesrv-addr", by_agent.address, "--no-sessions",
        )  # fmt: skip
        try:
            wait_registered(by_agent.remoting_address, "agent-a")
            yield Twins(by_broker, by_agent, broker, agent, work)
        finally:
            agent.terminate()
            out, err = agent.communicate(timeout=30)
            (work / "agent.log").write_text(out + err)


def java_client_view(twins: Twins, addr: str, name: str, topics: list[str]) -> dict[str, tuple[str, Any]]:
    """What RocketMQ 5.5.0's NettyRemotingClient gets: cluster info and every topic's route, each
    body parsed as RocketMQ's JSON (cluster info has fastjson's unquoted integer keys)."""
    from namesrv_grpc.wire.fastjson import loads

    requests = ["106", *(f"105;topic={t}" for t in topics)]
    done = run_java_client(ROCKETMQ_5, "Remoting", addr, *requests, workdir=twins.workdir / name)
    lines = done.stdout.splitlines()
    view: dict[str, tuple[str, Any]] = {}
    keys = iter(["clusterInfo", *topics])
    for i, line in enumerate(lines):
        if line.startswith("RESP "):
            key = next(keys)
            body = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("BODY ") else None
            view[key] = (line, loads(body.removeprefix("BODY ")) if body else None)
    assert len(view) == len(requests), done.stdout + done.stderr[-3000:]
    return view


def all_topics(addr: str) -> list[str]:
    from namesrv_grpc.wire.fastjson import loads
    from tests.remoting_support import RemotingTestClient

    with RemotingTestClient(addr) as client:
        answer = client.call(206)
    assert answer.code == 0
    return sorted(loads(answer.body)["topicList"])


def test_the_agent_registers_the_same_routes_as_the_broker_itself(twins: Twins) -> None:
    topics = all_topics(twins.by_broker.remoting_address)
    assert set(TOPICS) <= set(topics)
    assert all_topics(twins.by_agent.remoting_address) == topics
    own = java_client_view(twins, twins.by_broker.remoting_address, "view-broker", topics)
    agent = java_client_view(twins, twins.by_agent.remoting_address, "view-agent", topics)
    assert agent == own
    route = own[TOPICS[0]][1]
    assert route["queueDatas"] == [
        {"brokerName": "agent-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 4}
    ]


def test_the_agent_keeps_the_stopped_brokers_twin_with_the_same_routes(twins: Twins) -> None:
    topics = all_topics(twins.by_agent.remoting_address)
    before = java_client_view(twins, twins.by_agent.remoting_address, "before-stop", topics)
    twins.broker.stop()
    wait_unregistered(twins.by_broker.remoting_address, "agent-a")  # the broker unregistered itself
    time.sleep(12)  # past the agent's first periodic round (10 s after its start) and a scan
    assert twins.agent.poll() is None
    after = java_client_view(twins, twins.by_agent.remoting_address, "after-stop", topics)
    assert after == before
