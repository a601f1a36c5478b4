"""The real-RocketMQ harness itself (tests/rocketmq_support.py), with the smallest real check: a Java
RocketMQ 5.5.0 broker registers with our NameServer over remoting, and its route is what our gRPC
door answers. One NameServer and one broker JVM for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from tests.rocketmq_support import (
    CLIENT_JAVA,
    ROCKETMQ_4,
    ROCKETMQ_5,
    JavaProcess,
    JavaStartError,
    compiled_classes,
    free_port_block,
    java_processes,
    lib_dir,
    require_rocketmq,
    start_java,
    start_java_broker,
    wait_registered,
)
from tests.support import NamesrvProcess, Stubs, running_namesrv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    require_rocketmq(ROCKETMQ_5, ROCKETMQ_4, CLIENT_JAVA)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    with running_namesrv(tmp_path_factory.mktemp("namesrv")) as server:
        yield server


@pytest.fixture(scope="module")
def broker5(ours: NamesrvProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaProcess]:
    with java_processes() as procs:
        procs.append(
            start_java_broker(
                ROCKETMQ_5, tmp_path_factory.mktemp("broker5"), ours.remoting_address, {"brokerName": "smoke-a"}
            )
        )
        yield procs[0]


def wait_route(stubs: Stubs, topic: str, timeout: float = 60) -> types_pb2.TopicRouteData:
    """Our route of ``topic`` over gRPC, once there is one (a broker's first registration may come
    a moment after its boot line)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            response: ns_pb2.PickupTopicRouteResponse = stubs.ns.PickupTopicRoute(
                ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=10
            )
            return response.route
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def test_the_pinned_versions_are_installed() -> None:
    """`make rocketmq` put exactly the pinned artifacts in place: no other RocketMQ version leaks in."""
    for version in (ROCKETMQ_5, ROCKETMQ_4):
        jars = {p.name for p in lib_dir(version).glob("rocketmq-*.jar")}
        for part in ("namesrv", "broker", "tools", "client", "remoting"):
            assert f"rocketmq-{part}-{version}.jar" in jars, (version, sorted(jars))
        core = [j for j in jars if j.startswith(("rocketmq-broker-", "rocketmq-client-", "rocketmq-namesrv-"))]
        assert all(j.endswith(f"-{version}.jar") for j in core), core  # no other version leaks in
    assert (lib_dir(CLIENT_JAVA) / "rocketmq-client-java-5.0.8.jar").is_file()
    assert f"rocketmq-proxy-{ROCKETMQ_5}.jar" in {p.name for p in lib_dir(ROCKETMQ_5).glob("*.jar")}


def test_the_java_programs_compile_once() -> None:
    first = compiled_classes(ROCKETMQ_5)
    assert (first / "Producer.class").is_file()
    assert (first / "Remoting.class").is_file()
    stamp = (first / ".compiled").stat().st_mtime_ns
    assert compiled_classes(ROCKETMQ_5) == first
    assert (first / ".compiled").stat().st_mtime_ns == stamp
    assert (compiled_classes(CLIENT_JAVA) / "GrpcClient.class").is_file()
    assert (compiled_classes(ROCKETMQ_4) / "PushConsumer.class").is_file()


def test_a_process_that_dies_before_its_boot_line_reports_its_output(tmp_path: Path) -> None:
    with pytest.raises(JavaStartError) as raised:
        start_java(
            ROCKETMQ_5,
            tmp_path,
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            ["-c", str(tmp_path / "missing.conf")],
            boot_line="The Name Server boot success",
            timeout=60,
        )
    assert "missing.conf" in str(raised.value)
    assert "exited with" in str(raised.value)


def test_free_port_block_is_free() -> None:
    import socket

    base = free_port_block(4)
    for port in range(base, base + 4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_java_5_broker_registers_and_its_route_is_seen_over_our_grpc(
    ours: NamesrvProcess, broker5: JavaProcess
) -> None:
    with ours.channel() as channel:
        stubs = Stubs(channel)
        route = wait_route(stubs, "smoke-a")  # every broker registers a topic named after itself
        assert [(q.broker_name, q.perm) for q in route.queue_datas] == [("smoke-a", 7)]
        assert [(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in route.broker_datas] == [
            ("DefaultCluster", "smoke-a", {0: broker5.addr})
        ]
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=10)
        assert list(info.cluster_addr_table["DefaultCluster"].broker_names) == ["smoke-a"]
        assert "TBW102" in stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10).topics


def test_wait_registered_reads_any_namesrv(ours: NamesrvProcess, broker5: JavaProcess) -> None:
    assert wait_registered(ours.remoting_address, "smoke-a") == broker5.addr
    with pytest.raises(TimeoutError):
        wait_registered(ours.remoting_address, "smoke-a", broker_id=3, timeout=0.5)


def test_missing_jars_skip_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the jars a test skips; with NAMESRV_REQUIRE_ROCKETMQ=1 (make test) it fails, naming them."""
    monkeypatch.delenv("NAMESRV_REQUIRE_ROCKETMQ", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-version"):
        require_rocketmq("no-such-version")
    monkeypatch.setenv("NAMESRV_REQUIRE_ROCKETMQ", "1")
    with pytest.raises(pytest.fail.Exception, match=r"build/rocketmq/no-such-version/lib .*make rocketmq"):
        require_rocketmq("no-such-version")
    require_rocketmq(ROCKETMQ_5)  # present: nothing raised
