"""What new RocketMQ users run: a 5.5.0 ``rocketmq-proxy`` in cluster mode whose NameServer is ours, a
5.5.0 broker registered with us, and the official RocketMQ 5 gRPC client (rocketmq-client-java 5.0.8)
sending and receiving through the proxy. The proxy learns routes, brokers and its own cluster only
from our NameServer (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO over remoting)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.rocketmq_support import (
    CLIENT_JAVA,
    ROCKETMQ_5,
    JavaProcess,
    java_processes,
    mqadmin_batch,
    require_rocketmq,
    run_java_client,
    start_java_broker,
    start_java_proxy,
    wait_registered,
)
from tests.support import NamesrvProcess, running_namesrv

pytestmark = pytest.mark.slow

TOPIC = "ProxyTopic"


@dataclass
class ProxyCluster:
    ours: NamesrvProcess
    broker: JavaProcess
    proxy: JavaProcess
    workdir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyCluster]:
    require_rocketmq(ROCKETMQ_5, CLIENT_JAVA)
    work = tmp_path_factory.mktemp("proxy")
    with running_namesrv(work / "namesrv") as ours, java_processes() as procs:
        ns = ours.remoting_address
        procs.append(start_java_broker(ROCKETMQ_5, work / "broker", ns, {"brokerName": "proxy-a"}))
        wait_registered(ns, "proxy-a")
        (created,) = mqadmin_batch(
            ROCKETMQ_5,
            [
                (
                    "updateTopic",
                    "-c",
                    "DefaultCluster",
                    "-t",
                    TOPIC,
                    "-r",
                    "4",
                    "-w",
                    "4",
                    "-a",
                    "+message.type=NORMAL",
                    "-n",
                    ns,
                )
            ],
            workdir=work / "mqadmin",
        )
        assert "success" in created, created
        procs.append(start_java_proxy(work / "proxy", ns))
        yield ProxyCluster(ours, procs[0], procs[1], work)


def test_the_v5_grpc_client_sends_and_receives_through_a_proxy_on_our_namesrv(cluster: ProxyCluster) -> None:
    started = time.monotonic()
    done = run_java_client(
        CLIENT_JAVA, "GrpcClient", cluster.proxy.addr, TOPIC, "proxy-consumers", "20", "90",
        workdir=cluster.workdir / "client", timeout=240,
    )  # fmt: skip
    output = done.stdout + done.stderr[-4000:]
    assert done.returncode == 0, output
    assert "DONE sent=20 received=20" in done.stdout, output
    sent = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("SENT ")}
    received = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("RECV ")}
    assert sent == received == {f"key-{i}" for i in range(20)}
    assert time.monotonic() - started < 240


def test_the_proxy_sees_an_unknown_topic_as_our_namesrv_does(cluster: ProxyCluster) -> None:
    """A topic our NameServer has no route for: the client's producer cannot start; the proxy turns our
    TOPIC_NOT_EXIST (17) and its remark into gRPC's TOPIC_NOT_FOUND (40402)."""
    done = run_java_client(
        CLIENT_JAVA, "GrpcClient", cluster.proxy.addr, "NoSuchProxyTopic", "proxy-consumers", "1", "5",
        workdir=cluster.workdir / "client-unknown", timeout=180,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "response-code=40402" in output
    assert "CODE: 17  DESC: No topic route info in name server for the topic: NoSuchProxyTopic" in output
