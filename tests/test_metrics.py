"""The NameServer's /metrics, scraped over HTTP from a real ``python -m namesrv_grpc`` process:
fixed names and types, label sets, gRPC series of every method from the start, and counts that
follow real calls (including status codes set by the error interceptor)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import CollectorRegistry, generate_latest

from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.grpc_api.grpc_metrics import GrpcServerMetrics
from namesrv_grpc.grpc_api.handlers import wrap_stream_response, wrap_unary_response
from namesrv_grpc.metrics import REGISTRATION_RESULTS
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.metrics_support import Scrape, fetch, free_port, parse, scrape, wait_until
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, register_request, running_namesrv, topic

NS = "namesrv.v1.NameServerService"
BROKER_ADDR = "127.0.0.1:10911"


@dataclass
class MetricsNamesrv:
    server: NamesrvProcess
    url: str

    def scrape(self) -> Scrape:
        return scrape(self.url)


@pytest.fixture
def ns(tmp_path: Path) -> Iterator[MetricsNamesrv]:
    """A NameServer process with /metrics on a free port (expiry scan every 200 ms)."""
    port = free_port()
    extra = ("--scan-not-active-broker-interval", "200", "--metrics-port", str(port))
    with running_namesrv(tmp_path / "namesrv", *extra) as server:
        yield MetricsNamesrv(server, f"http://127.0.0.1:{port}/metrics")


@pytest.fixture
def stubs(ns: MetricsNamesrv) -> Iterator[Stubs]:
    with ns.server.channel() as channel:
        yield Stubs(channel)


def handled(scrape: Scrape, service: str, method: str, code: str) -> float:
    return scrape.value("grpc_server_handled_total", grpc_service=service, grpc_method=method, grpc_code=code)


def started(scrape: Scrape, service: str, method: str) -> float:
    return scrape.value("grpc_server_started_total", grpc_service=service, grpc_method=method)


def test_fixed_names_types_and_labels(ns: MetricsNamesrv) -> None:
    metrics = ns.scrape()
    expected_types = {
        "namesrv_brokers_live": "gauge",
        "namesrv_broker_names": "gauge",
        "namesrv_clusters": "gauge",
        "namesrv_topics": "gauge",
        "namesrv_queue_datas": "gauge",
        "namesrv_registrations": "counter",
        "namesrv_unregistrations": "counter",
        "namesrv_broker_expirations": "counter",
        "namesrv_broker_session_losses": "counter",
        "namesrv_body_checksum_failures": "counter",
        "namesrv_kv_config_writes": "counter",
        "namesrv_kv_config_flushes": "counter",
        "namesrv_kv_config_writes_per_flush": "histogram",
        "namesrv_auth_refusals": "counter",
        "namesrv_audit_lines_suppressed": "counter",
        "namesrv_registration_duration_seconds": "histogram",
        "namesrv_route_lookup_duration_seconds": "histogram",
        "namesrv_gc_pause_seconds": "histogram",
        "namesrv_event_loop_lag_seconds": "histogram",
        "namesrv_build_info": "gauge",
        "grpc_server_started": "counter",
        "grpc_server_handled": "counter",
        "grpc_server_handling_seconds": "histogram",
        "namesrv_remoting_requests": "counter",
        "namesrv_remoting_request_duration_seconds": "histogram",
        "namesrv_remoting_connections": "gauge",
        "namesrv_remoting_connections_opened": "counter",
        "namesrv_remoting_frame_errors": "counter",
        "namesrv_remoting_max_connections": "gauge",
        "namesrv_remoting_connections_refused": "counter",
        "namesrv_remoting_frames_refused": "counter",
        "namesrv_remoting_partial_frame_bytes": "gauge",
        "namesrv_remoting_reads_paused": "counter",
        "namesrv_remoting_end_of_input": "counter",
        "namesrv_log_lines_suppressed": "counter",
        "namesrv_processes": "gauge",
        "namesrv_serving_process_restarts": "counter",
        "namesrv_answer_bytes": "gauge",
        "namesrv_answer_max_bytes": "gauge",
        "namesrv_route_table_busy_seconds": "counter",
    }
    assert {name: metrics.types.get(name) for name in expected_types} == expected_types
    for name in (
        "namesrv_brokers_live",
        "namesrv_topics",
        "namesrv_broker_expirations_total",
        "namesrv_broker_session_losses_total",
        "namesrv_body_checksum_failures_total",
        "namesrv_unregistrations_total",
        "namesrv_kv_config_writes_total",
    ):
        assert metrics.value(name) == 0, name
    assert metrics.find("namesrv_build_info") == metrics.find(
        "namesrv_build_info", version=metadata.version("namesrv-grpc")
    )
    assert metrics.value("namesrv_build_info") == 1
    registrations = metrics.find("namesrv_registrations_total")
    assert {tuple(s.labels) for s in registrations} == {("result",)}
    assert {s.labels["result"]: s.value for s in registrations} == dict.fromkeys(REGISTRATION_RESULTS, 0.0)
    for sample in metrics.samples:
        if sample.name.startswith("grpc_server_"):
            labels = set(sample.labels) - {"le"}
            expected = {"grpc_type", "grpc_service", "grpc_method"}
            if sample.name.startswith("grpc_server_handled"):
                expected.add("grpc_code")
            assert labels == expected, sample
        elif sample.name.startswith("namesrv_remoting_requests"):
            assert set(sample.labels) == {"request_code", "response_code"}, sample
        elif sample.name.startswith("namesrv_remoting_request_duration_seconds"):
            assert set(sample.labels) - {"le"} == {"request_code"}, sample
        elif sample.name.startswith(("namesrv_registration_duration_seconds", "namesrv_route_lookup_duration_seconds")):
            assert set(sample.labels) - {"le"} == {"protocol"}, sample
        elif sample.name.startswith("namesrv_"):
            assert set(sample.labels) <= {
                "result",
                "version",
                "le",
                "reason",
                "logger",
                "generation",
                "role",
                "reading",
                "answer",
            }, sample
    for name in ("namesrv_registration_duration_seconds_count", "namesrv_route_lookup_duration_seconds_count"):
        assert {s.labels["protocol"]: s.value for s in metrics.find(name)} == {"remoting": 0, "grpc": 0}, name
    gc_pauses = metrics.find("namesrv_gc_pause_seconds_count")
    assert {s.labels["generation"] for s in gc_pauses} == {"0", "1", "2"}


def test_gc_pauses_and_event_loop_lag_are_observed(ns: MetricsNamesrv, stubs: Stubs) -> None:
    """The loop-lag probe ticks every 100 ms; registrations allocate enough for young collections."""
    for index in range(20):
        topics = [topic(f"T{index}-{i}") for i in range(200)]
        request = register_request(
            broker_addr=f"127.0.0.1:{11000 + index}", broker_name=f"broker-{index}", topics=topics
        )
        stubs.ns.RegisterBroker(request, timeout=10)

    def observed() -> bool:
        metrics = ns.scrape()
        return (
            metrics.value("namesrv_event_loop_lag_seconds_count") >= 5
            and metrics.value("namesrv_gc_pause_seconds_count", generation="0") >= 1
        )

    wait_until(observed, 20, "loop-lag ticks and a young collection on /metrics")
    metrics = ns.scrape()
    lag = metrics.find("namesrv_event_loop_lag_seconds_bucket")
    assert lag[-1].labels["le"] == "+Inf"
    assert lag[-1].value == metrics.value("namesrv_event_loop_lag_seconds_count")


def list_services(channel: grpc.Channel) -> list[str]:
    """The services the server lists through reflection (a bidi-streaming call)."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    return [s.name for response in responses for s in response.list_services_response.service]


def test_grpc_ok_series_of_every_method_exist_up_front(ns: MetricsNamesrv, stubs: Stubs) -> None:
    """Every method of every service the server lists has its ``handled_total{grpc_code="OK"}``
    series at 0 before any call (the denominator of error ratios), and no other zero series: no
    other status code, no ``started_total`` or ``handling_seconds`` of a method never called."""
    metrics = ns.scrape()
    services = list_services(stubs.channel)
    assert {NS, "namesrv.v1.KVConfigService", "namesrv.v1.AdminService"} <= set(services)
    assert {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= set(services)
    kinds = {
        (False, False): "unary",
        (True, False): "client_stream",
        (False, True): "server_stream",
        (True, True): "bidi_stream",
    }
    for service_name in services:
        service = descriptor_pool.Default().FindServiceByName(service_name)
        for method in service.methods:
            labels = {
                "grpc_type": kinds[method.client_streaming, method.server_streaming],
                "grpc_service": service_name,
                "grpc_method": method.name,
            }
            codes = {s.labels["grpc_code"] for s in metrics.find("grpc_server_handled_total", **labels)}
            if service_name == "grpc.health.v1.Health" and method.name == "Check":
                continue  # the test harness waits with health checks
            assert codes == {"OK"}, labels
            assert metrics.value("grpc_server_handled_total", **labels, grpc_code="OK") == 0, labels
            assert metrics.find("grpc_server_started_total", **labels) == [], labels
            assert metrics.find("grpc_server_handling_seconds_count", **labels) == [], labels
    assert metrics.value("grpc_server_handled_total", grpc_method="Check", grpc_code="OK") >= 1
    after = ns.scrape()
    reflection = {"grpc_service": "grpc.reflection.v1alpha.ServerReflection", "grpc_type": "bidi_stream"}
    assert after.value("grpc_server_handled_total", **reflection, grpc_code="OK") == 1
    assert after.value("grpc_server_started_total", **reflection) == 1
    assert after.value("grpc_server_handling_seconds_count", **reflection) == 1


def test_counts_follow_real_calls(ns: MetricsNamesrv, stubs: Stubs) -> None:
    before = ns.scrape()
    topics = [topic("TopicTest"), topic("TopicOther", read=8, write=8)]
    stubs.ns.RegisterBroker(register_request(broker_addr=BROKER_ADDR, topics=topics))

    bad_crc = register_request(broker_addr=BROKER_ADDR, topics=topics)
    bad_crc.body_crc32c ^= 1
    with pytest.raises(grpc.RpcError) as refused:
        stubs.ns.RegisterBroker(bad_crc)
    assert refused.value.code() == grpc.StatusCode.DATA_LOSS
    with pytest.raises(grpc.RpcError) as invalid:
        stubs.ns.RegisterBroker(register_request(broker_addr="no-port"))
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"))
    with pytest.raises(grpc.RpcError) as missing:
        stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="NoSuchTopic"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="ns", key="k", value="v"))
    with pytest.raises(grpc.RpcError):
        stubs.kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace="ns", key="absent"))

    during = ns.scrape()
    assert during.value("namesrv_brokers_live") == 1
    assert during.value("namesrv_broker_names") == 1
    assert during.value("namesrv_clusters") == 1
    assert during.value("namesrv_topics") == 2
    assert during.value("namesrv_queue_datas") == 2
    assert during.value("namesrv_registrations_total", result="ok") == 1
    assert during.value("namesrv_registrations_total", result="body_checksum_mismatch") == 1
    assert during.value("namesrv_registrations_total", result="invalid_field") == 1
    assert during.value("namesrv_body_checksum_failures_total") == 1
    assert during.value("namesrv_registration_duration_seconds_count", protocol="grpc") == 3
    assert during.value("namesrv_registration_duration_seconds_count", protocol="remoting") == 0
    assert during.value("namesrv_route_lookup_duration_seconds_count", protocol="grpc") == 2
    assert during.value("namesrv_route_lookup_duration_seconds_count", protocol="remoting") == 0
    assert during.value("namesrv_kv_config_writes_total") == 1

    # Final status codes, including those the error interceptor sets with context.abort.
    assert handled(during, NS, "RegisterBroker", "OK") == 1
    assert handled(during, NS, "RegisterBroker", "DATA_LOSS") == 1
    assert handled(during, NS, "RegisterBroker", "INVALID_ARGUMENT") == 1
    assert handled(during, NS, "PickupTopicRoute", "OK") == 1
    assert handled(during, NS, "PickupTopicRoute", "NOT_FOUND") == 1
    assert during.find("grpc_server_handled_total", grpc_method="PickupTopicRoute", grpc_code="UNKNOWN") == []
    assert handled(during, "namesrv.v1.KVConfigService", "GetKVConfig", "NOT_FOUND") == 1
    for service, method, calls in ((NS, "RegisterBroker", 3), (NS, "PickupTopicRoute", 2)):
        assert before.find("grpc_server_started_total", grpc_service=service, grpc_method=method) == []
        assert started(during, service, method) == calls
        total = sum(s.value for s in during.find("grpc_server_handled_total", grpc_method=method))
        assert total == calls
        assert during.value("grpc_server_handling_seconds_count", grpc_method=method) == calls

    # No topic and no address is ever a label value.
    for sample in during.samples:
        for value in sample.labels.values():
            assert not {"TopicTest", "TopicOther", "NoSuchTopic", "broker-a"} & {value}, sample
            assert "127.0.0.1" not in value, sample
            assert "10911" not in value, sample

    stubs.ns.UnregisterBroker(
        ns_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr=BROKER_ADDR
        )
    )
    after = ns.scrape()
    assert after.value("namesrv_unregistrations_total") == 1
    assert after.value("namesrv_brokers_live") == 0
    assert after.value("namesrv_broker_expirations_total") == 0


def remoting_register(client: RemotingTestClient, topics: list[str], addr: str = BROKER_ADDR) -> RemotingCommand:
    """REGISTER_BROKER of broker-a (master) as a Java broker sends it, with ``topics``."""
    body = bodies.encode_register_broker_body(
        {name: topic(name) for name in topics}, DataVersion(0, 1, 1), compressed=False
    )
    fields = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerAddr": addr,
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return client.call(RequestCode.REGISTER_BROKER, fields, body)


def test_remoting_requests_are_timed_like_grpc_ones(ns: MetricsNamesrv) -> None:
    """A Java client's GET_ROUTEINFO_BY_TOPIC lands in namesrv_route_lookup_duration_seconds (with
    protocol="remoting"), a Java broker's REGISTER_BROKER in namesrv_registration_duration_seconds,
    and every request code in its own namesrv_remoting_request_duration_seconds series."""
    lookups = 128
    with RemotingTestClient(ns.server.remoting_address) as client:
        assert remoting_register(client, ["SELF_TEST_TOPIC", "TopicTest"]).code == ResponseCode.SUCCESS
        for _ in range(lookups - 1):
            assert client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}).code == ResponseCode.SUCCESS
        missing = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert client.call(9999).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    metrics = ns.scrape()
    assert metrics.value("namesrv_route_lookup_duration_seconds_count", protocol="remoting") == lookups
    assert metrics.value("namesrv_route_lookup_duration_seconds_count", protocol="grpc") == 0
    assert metrics.value("namesrv_route_lookup_duration_seconds_bucket", protocol="remoting", le="+Inf") == lookups
    assert metrics.value("namesrv_route_lookup_duration_seconds_sum", protocol="remoting") > 0
    assert metrics.value("namesrv_registration_duration_seconds_count", protocol="remoting") == 1
    assert metrics.value("namesrv_registration_duration_seconds_count", protocol="grpc") == 0
    assert metrics.value("namesrv_registrations_total", result="ok") == 1

    def duration_count(code: str) -> float:
        return metrics.value("namesrv_remoting_request_duration_seconds_count", request_code=code)

    assert duration_count("GET_ROUTEINFO_BY_TOPIC") == lookups
    assert duration_count("REGISTER_BROKER") == 1
    assert duration_count("unknown") == 1
    timed = {s.labels["request_code"] for s in metrics.find("namesrv_remoting_request_duration_seconds_count")}
    assert timed == {"GET_ROUTEINFO_BY_TOPIC", "REGISTER_BROKER", "unknown"}, "codes never requested have no histogram"
    requests = {
        (s.labels["request_code"], s.labels["response_code"]): s.value
        for s in metrics.find("namesrv_remoting_requests_total")
        if s.value
    }
    assert requests == {
        ("REGISTER_BROKER", "SUCCESS"): 1,
        ("GET_ROUTEINFO_BY_TOPIC", "SUCCESS"): lookups - 1,
        ("GET_ROUTEINFO_BY_TOPIC", "TOPIC_NOT_EXIST"): 1,
        ("unknown", "REQUEST_CODE_NOT_SUPPORTED"): 1,
    }


def test_metrics_page_stays_small_with_one_broker(ns: MetricsNamesrv) -> None:
    """One Java broker registered and a few lookups: /metrics holds no zero series of a door nobody
    uses beyond one per gRPC method (handled_total, code OK) and one per remoting request code
    (requests_total, SUCCESS), and stays small (it was 186 KB with 1,366 samples, 526 of them zero
    grpc_server_handled_total series, before)."""
    with RemotingTestClient(ns.server.remoting_address) as client:
        assert remoting_register(client, ["SELF_TEST_TOPIC", "TopicTest"]).code == ResponseCode.SUCCESS
        for _ in range(10):
            client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        text = fetch(ns.url)
    metrics = parse(text)
    assert metrics.value("namesrv_brokers_live") == 1
    zero_handled = {s.labels["grpc_code"] for s in metrics.find("grpc_server_handled_total") if s.value == 0}
    assert zero_handled == {"OK"}
    zero_remoting = {s.labels["response_code"] for s in metrics.find("namesrv_remoting_requests_total") if s.value == 0}
    assert zero_remoting == {"SUCCESS"}
    assert len(metrics.find("grpc_server_handled_total")) < 40
    assert len(metrics.samples) < 500, len(metrics.samples)
    assert len(text.encode()) < 64 * 1024, len(text.encode())


def test_answer_sizes_against_their_bound_and_the_route_table_busy_time(ns: MetricsNamesrv, stubs: Stubs) -> None:
    """What an operator watches before registrations are refused: the topic list's and the cluster
    info's estimated sizes grow with the table, against the bound (the smaller of
    remotingFrameMaxLength and grpcMaxMessageSize, less 64 KiB); the route-table process's busy
    time grows with the writes it applies."""
    before = ns.scrape()
    assert before.value("namesrv_answer_max_bytes") == 16 * 1024 * 1024 - 64 * 1024
    empty = before.value("namesrv_answer_bytes", answer="topic_list")
    names = [f"SizedTopic-{i:04d}" for i in range(200)]
    stubs.ns.RegisterBroker(register_request(topics=[topic(name) for name in names]), timeout=5)
    after = ns.scrape()
    grown = after.value("namesrv_answer_bytes", answer="topic_list") - empty
    assert grown == sum(len(name) + 3 for name in names)  # each name quoted, with its comma
    assert after.value("namesrv_answer_bytes", answer="cluster_info") > before.value(
        "namesrv_answer_bytes", answer="cluster_info"
    )
    assert after.value("namesrv_route_table_busy_seconds_total") > before.value(
        "namesrv_route_table_busy_seconds_total"
    )


def test_expiration_counted(ns: MetricsNamesrv, stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("Silent")], heartbeat_timeout_millis=300))
    assert ns.scrape().value("namesrv_brokers_live") == 1
    wait_until(lambda: ns.scrape().value("namesrv_broker_expirations_total") == 1, 10, "the silent broker to expire")
    final = ns.scrape()
    assert final.value("namesrv_brokers_live") == 0
    assert final.value("namesrv_unregistrations_total") == 0


def test_cancelled_server_stream_counted(ns: MetricsNamesrv, stubs: Stubs) -> None:
    """A server-streaming call (health Watch) the client cancels ends as CANCELLED."""
    watch = stubs.health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    labels = {"grpc_service": "grpc.health.v1.Health", "grpc_method": "Watch", "grpc_type": "server_stream"}
    wait_until(
        lambda: ns.scrape().total("grpc_server_handled_total", **labels, grpc_code="CANCELLED") == 1,
        10,
        "the cancelled Watch to be counted",
    )
    assert ns.scrape().value("grpc_server_started_total", **labels) == 1


def test_handler_wrappers_kinds_and_final_codes_in_process() -> None:
    """The metrics wrappers of grpc_api.handlers on a bare grpc.aio server: a unary handler that sets
    a code without raising, one that raises (UNKNOWN), and a bidi handler written as a plain function
    returning an async iterator (as the broker-session handler is)."""

    async def set_code(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        context.set_code(grpc.StatusCode.ALREADY_EXISTS)
        return b""

    async def boom(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        raise RuntimeError("boom")

    def echo(requests: AsyncIterator[bytes], context: object) -> AsyncIterator[bytes]:
        async def responses() -> AsyncIterator[bytes]:
            async for request in requests:
                yield request

        return responses()

    async def run() -> Scrape:
        registry = CollectorRegistry()
        metrics = GrpcServerMetrics(registry)
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "SetCode": grpc.unary_unary_rpc_method_handler(
                wrap_unary_response(set_code, metrics.method(("unary", "test.Svc", "SetCode")))
            ),
            "Boom": grpc.unary_unary_rpc_method_handler(
                wrap_unary_response(boom, metrics.method(("unary", "test.Svc", "Boom")))
            ),
            "Echo": grpc.stream_stream_rpc_method_handler(
                wrap_stream_response(echo, metrics.method(("bidi_stream", "test.Svc", "Echo")))
            ),
        }
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Svc", handlers),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                for method in ("SetCode", "Boom"):
                    unary: Any = channel.unary_unary(f"/test.Svc/{method}")
                    with pytest.raises(grpc.aio.AioRpcError):
                        await unary(b"x")
                bidi: Any = channel.stream_stream("/test.Svc/Echo")
                call = bidi(iter([b"a", b"b"]))
                assert [r async for r in call] == [b"a", b"b"]
        finally:
            await server.stop(None)
        return parse(generate_latest(registry).decode())

    metrics = asyncio.run(run())
    assert metrics.value("grpc_server_handled_total", grpc_method="SetCode", grpc_code="ALREADY_EXISTS") == 1
    assert metrics.value("grpc_server_handled_total", grpc_method="Boom", grpc_code="UNKNOWN") == 1
    echo_labels = {"grpc_method": "Echo", "grpc_type": "bidi_stream", "grpc_service": "test.Svc"}
    assert metrics.value("grpc_server_handled_total", **echo_labels, grpc_code="OK") == 1
    assert metrics.value("grpc_server_started_total", **echo_labels) == 1
