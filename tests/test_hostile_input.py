"""Hostile requests against a real NameServer process (issue 10, "No request can hurt the server").

One test per attack. Each runs the attack from ``bench/hostile.py`` against a fresh server while a
separate process looks a topic up in a loop, then asserts: the attacker was refused, lookups stayed
fast meanwhile, the server's peak resident memory (``VmHWM``) stayed bounded, and the state
(cluster info, routes, KV table, configuration) is exactly what it was.

The latency bound is loose on purpose: these tests share a 2-core machine with other work, where
even an idle server's p99 can reach tens of milliseconds. The figures measured on a quiet machine
(before and after this hardening) are in docs/hardening.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from bench import hostile
from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from tests.support import NamesrvProcess, register_request, running_namesrv

LOOKUP_P99_BOUND_MS = 1_000.0
"""p99 of concurrent lookups during an attack. Unhardened, the 160 KiB body froze lookups for as
long as it took to inflate and scan (27.7 s in the issue); hardened, lookups keep their latency
(docs/hardening.md has the figures). A loaded 2-core box must not fail the test, so the bound is far
above the quiet-machine figure and far below a frozen event loop."""

LOOKUP_MAX_BOUND_MS = 3_000.0
"""The longest single lookup during an attack."""

PEAK_RSS_GROWTH_BOUND_MIB = 300
"""How much the server's peak resident memory may grow during one attack (unhardened, the 1 MiB
deflate bomb alone took about 1 GiB)."""

MIB = 1024 * 1024


def state(server: NamesrvProcess) -> dict[str, bytes]:
    """Everything an attack could change, serialized."""
    with server.channel() as channel:
        stubs = hostile.stubs_for(channel)
        # deterministic: map fields are serialized in hash order, which differs between serving processes
        cluster = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest())
        result = {"cluster": cluster.SerializeToString(deterministic=True)}
        for topic in (hostile.PROBE_TOPIC, hostile.VICTIM_TOPIC):
            request = ns_pb2.PickupTopicRouteRequest(topic=topic)
            result[topic] = stubs.ns.PickupTopicRoute(request).SerializeToString(deterministic=True)
        table = stubs.kv.GetKVListByNamespace(kv_pb2.GetKVListByNamespaceRequest(namespace="ORDER_TOPIC_CONFIG"))
        result["kv"] = table.SerializeToString(deterministic=True)
        config = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest())
        result["config"] = config.SerializeToString(deterministic=True)
        topics = stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest())
        result["topics"] = topics.SerializeToString(deterministic=True)
    return result


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NamesrvProcess]:
    with running_namesrv(tmp_path / "namesrv") as process:
        with process.channel() as channel:
            hostile.prepare(hostile.stubs_for(channel))
        yield process


def run(server: NamesrvProcess, name: str) -> hostile.AttackResult:
    """Run attack ``name`` and check what every attack must leave behind."""
    before = state(server)
    result = hostile.run_attack(server.address, server.process.pid, name, hostile.ATTACKS[name])
    print(result.row())  # the figures, in the test log
    assert result.alive, "the server stopped answering"
    assert result.probe.failed == 0, f"lookups failed during the attack: {result.probe}"
    assert result.probe.p99_ms < LOOKUP_P99_BOUND_MS, result.probe
    assert result.probe.max_ms < LOOKUP_MAX_BOUND_MS, result.probe
    growth = result.peak_rss_after_mib - result.peak_rss_before_mib
    assert growth < PEAK_RSS_GROWTH_BOUND_MIB, f"peak RSS grew {growth:.0f} MiB"
    assert "OK" not in result.codes, f"an attack request was accepted: {result.codes}"
    assert state(server) == before, "a rejected request changed the state"
    return result


def test_compressed_160kib_body_inflating_past_the_cap_is_refused_without_freezing_lookups(
    server: NamesrvProcess,
) -> None:
    result = run(server, "compressed-160KiB")
    assert result.codes == ["INVALID_ARGUMENT"]


def test_1mib_deflate_bomb_is_refused_with_bounded_memory(server: NamesrvProcess) -> None:
    result = run(server, "deflate-bomb-1MiB")
    assert result.codes == ["INVALID_ARGUMENT"]


def test_5mib_zone_name_on_a_fake_slave_is_refused(server: NamesrvProcess) -> None:
    result = run(server, "zone-name-5MiB")
    assert result.codes == ["INVALID_ARGUMENT"]
    # The victim's route still fits a client with gRPC's default 4 MiB receive limit.
    with server.channel() as channel:
        route = hostile.stubs_for(channel).ns.PickupTopicRoute(
            ns_pb2.PickupTopicRouteRequest(topic=hostile.VICTIM_TOPIC), timeout=10
        )
    assert [b.broker_name for b in route.route.broker_datas] == ["broker-a"]


def test_5mib_order_topic_config_value_is_refused(server: NamesrvProcess) -> None:
    result = run(server, "kv-order-value-5MiB")
    assert result.codes == ["INVALID_ARGUMENT"]


def test_1mib_in_every_string_field_is_refused_with_a_short_message(server: NamesrvProcess) -> None:
    run(server, "huge-fields")
    options = [("grpc.max_send_message_length", 64 * MIB)]
    with grpc.insecure_channel(server.address, options=options) as channel:
        stubs = hostile.stubs_for(channel)
        for field, call in hostile.huge_field_requests():
            with pytest.raises(grpc.RpcError) as caught:
                call(stubs)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
            details = caught.value.details() or ""
            assert len(details) < 400, f"{field}: {len(details)} characters of details"
    written = (
        (server.workdir / "namesrv.properties").read_text() if (server.workdir / "namesrv.properties").exists() else ""
    )
    assert "evil" not in written


def test_largest_request_of_distinct_topics_is_refused_by_the_topic_limit(server: NamesrvProcess) -> None:
    result = run(server, "max-request-16MiB")
    assert result.codes == ["RESOURCE_EXHAUSTED"]


def test_a_request_over_16_mib_is_refused_by_grpc(server: NamesrvProcess) -> None:
    body = b"\x00" * (17 * MIB)
    options = [("grpc.max_send_message_length", 64 * MIB)]
    with grpc.insecure_channel(server.address, options=options) as channel, pytest.raises(grpc.RpcError) as caught:
        hostile.stubs_for(channel).ns.RegisterBroker(hostile.register(body, compressed=False), timeout=60)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_lookups_stay_fast_during_a_compressed_registration_of_34000_topics(server: NamesrvProcess) -> None:
    """Not an attack (it is accepted): 160 KiB of zlib holding as many distinct topics as fit, decoded
    in a worker thread while lookups go on."""
    result = hostile.run_attack(
        server.address, server.process.pid, "compressed-160KiB-distinct", hostile.ATTACKS["compressed-160KiB-distinct"]
    )
    print(result.row())
    assert result.codes == ["OK"]
    assert result.probe.failed == 0
    assert result.probe.p99_ms < LOOKUP_P99_BOUND_MS, result.probe


def test_a_registration_whose_reply_would_be_too_large_changes_nothing(tmp_path: Path) -> None:
    """An ORDER_TOPIC_CONFIG table larger than a reply may carry (here written into the file by hand,
    past kvConfigMaxTotalSize) makes registrations fail before they are applied."""
    workdir = tmp_path / "namesrv"
    workdir.mkdir()
    table = {"ORDER_TOPIC_CONFIG": {f"Topic{i}": "broker-a:4;" * 1000 for i in range(300)}}  # about 3.3 MB
    (workdir / "kvConfig.json").write_text(json.dumps({"configTable": table}))
    with running_namesrv(workdir) as process, process.channel() as channel:
        stubs = hostile.stubs_for(channel)
        request = hostile.register(hostile.legit_body(["T1"]), compressed=False, broker_name="broker-x")
        with pytest.raises(grpc.RpcError) as caught:
            stubs.ns.RegisterBroker(request, timeout=30)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "kvConfigMaxTotalSize" in (caught.value.details() or "")
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=10)
        assert "broker-x" not in info.broker_addr_table
        # Deleting keys brings the table under the limit; then registrations work (and reply).
        for i in range(150):
            stubs.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key=f"Topic{i}"))
        response = stubs.ns.RegisterBroker(request, timeout=30)
        assert len(response.kv_table) == 150


def test_kv_total_size_is_bounded_so_replies_fit_default_clients(server: NamesrvProcess) -> None:
    value = "b:4;" * (60 * 1024 // 4)
    codes = []
    with server.channel() as channel:  # gRPC's default limits: 4 MiB per message received
        stubs = hostile.stubs_for(channel)
        for i in range(60):
            try:
                request = kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key=f"T{i}", value=value)
                stubs.kv.PutKVConfig(request, timeout=30)
                codes.append("OK")
            except grpc.RpcError as error:
                codes.append(error.code().name)
        assert codes.count("OK") == 34  # 2 MiB / (60 KiB + key)
        assert set(codes[34:]) == {"RESOURCE_EXHAUSTED"}
        reply = stubs.ns.RegisterBroker(hostile.register(hostile.legit_body(["T1"]), compressed=False), timeout=30)
        assert len(reply.kv_table) == 34


def test_control_characters_in_names_never_reach_the_log(server: NamesrvProcess) -> None:
    with server.channel() as channel:
        stubs = hostile.stubs_for(channel)
        for name in ("evil\nFAKE LOG LINE", "evil\x1b[31mred"):
            with pytest.raises(grpc.RpcError):
                stubs.ns.RegisterBroker(hostile.register(b"", compressed=False, broker_name=name), timeout=10)
            with pytest.raises(grpc.RpcError):
                stubs.admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config={name: "1"}), timeout=10)
    log = server.stderr_path.read_text()
    assert "\x1b" not in log
    assert not re.search(r"^FAKE LOG LINE", log, re.MULTILINE)


def test_malformed_requests_are_invalid_argument(server: NamesrvProcess) -> None:
    with server.channel() as channel:
        for method in (
            "/namesrv.v1.NameServerService/PickupTopicRoute",
            "/namesrv.v1.NameServerService/RegisterBroker",
            "/namesrv.v1.KVConfigService/PutKVConfig",
            "/namesrv.v1.AdminService/UpdateNamesrvConfig",
        ):
            call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
            with pytest.raises(grpc.RpcError) as caught:
                call(b"\xff\xff\xff\xff", timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
            assert "not a valid" in (caught.value.details() or "")
        session: grpc.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(
            "/namesrv.v1.NameServerService/OpenBrokerSession"
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(session(iter([b"\xff\xff\xff\xff"]), timeout=10))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@contextmanager
def _session_server(tmp_path: Path, **settings: int) -> Iterator[NamesrvProcess]:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    with running_namesrv(tmp_path / "namesrv", "-c", str(conf)) as process:
        yield process


def test_a_session_without_hello_is_ended_after_the_deadline(tmp_path: Path) -> None:
    import queue
    import time

    with _session_server(tmp_path, brokerSessionHelloTimeoutMillis=500) as process, process.channel() as channel:
        stubs = hostile.stubs_for(channel)
        silent: queue.Queue[ns_pb2.OpenBrokerSessionRequest] = queue.Queue()
        started = time.monotonic()
        stream = stubs.ns.OpenBrokerSession(iter(silent.get, None), timeout=30)
        with pytest.raises(grpc.RpcError) as caught:
            next(stream)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "brokerSessionHelloTimeoutMillis" in (caught.value.details() or "")
        assert time.monotonic() - started < 10
        silent.put(None)  # type: ignore[arg-type]


def test_sessions_beyond_max_broker_sessions_are_refused(tmp_path: Path) -> None:
    """maxBrokerSessions counts sessions bound to a registered broker (issue 30): with 2, the third
    registered broker's hello is RESOURCE_EXHAUSTED, while a hello for a broker that is not registered
    is still answered (register_required): it binds nothing, so it takes no slot."""
    import queue

    settings = {"maxBrokerSessions": 2, "brokerSessionHelloTimeoutMillis": 60_000}
    with _session_server(tmp_path, **settings) as process, process.channel() as channel:
        stubs = hostile.stubs_for(channel)
        names = ["broker-a", "broker-b", "broker-c", "broker-unregistered"]
        for index, name in enumerate(names[:3]):
            stubs.ns.RegisterBroker(
                register_request(broker_name=name, broker_addr=f"127.0.0.1:{10911 + index}"), timeout=30
            )
        feeds: list[queue.Queue[ns_pb2.OpenBrokerSessionRequest | None]] = [queue.Queue() for _ in names]
        streams = [stubs.ns.OpenBrokerSession(iter(feed.get, None), timeout=30) for feed in feeds]
        codes = []
        for index, (name, feed, stream) in enumerate(zip(names, feeds, streams, strict=True)):
            hello = ns_pb2.SessionHello(
                cluster_name="DefaultCluster", broker_name=name, broker_id=0, broker_addr=f"127.0.0.1:{10911 + index}"
            )
            feed.put(ns_pb2.OpenBrokerSessionRequest(hello=hello))
            try:
                codes.append(next(stream).WhichOneof("kind"))
            except grpc.RpcError as error:
                codes.append(error.code().name)
        for feed in feeds:
            feed.put(None)
        assert codes == ["accepted", "accepted", "RESOURCE_EXHAUSTED", "register_required"]


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    import threading
    import time

    with _session_server(tmp_path, grpcMaxConnectionIdleMillis=1_000) as process, process.channel() as channel:
        states: list[grpc.ChannelConnectivity] = []
        changed = threading.Event()

        def record(state: grpc.ChannelConnectivity) -> None:
            states.append(state)
            changed.set()

        hostile.stubs_for(channel).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10)
        channel.subscribe(record, try_to_connect=False)
        deadline = time.monotonic() + 20
        while grpc.ChannelConnectivity.IDLE not in states[1:] and time.monotonic() < deadline:
            changed.wait(1)
            changed.clear()
        assert states[0] == grpc.ChannelConnectivity.READY
        assert grpc.ChannelConnectivity.IDLE in states[1:], states


def test_calls_in_flight_per_connection_are_limited(tmp_path: Path) -> None:
    """With grpcMaxConcurrentStreams=1, an open session occupies the connection's only stream: a
    second call on the same connection waits (here: until its deadline), one on another connection
    does not."""
    import queue

    with _session_server(tmp_path, grpcMaxConcurrentStreams=1) as process, process.channel() as channel:
        stubs = hostile.stubs_for(channel)
        stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10)  # connected
        feed: queue.Queue[ns_pb2.OpenBrokerSessionRequest | None] = queue.Queue()
        stream = stubs.ns.OpenBrokerSession(iter(feed.get, None), timeout=30)
        hello = ns_pb2.SessionHello(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr="127.0.0.1:10911"
        )
        feed.put(ns_pb2.OpenBrokerSessionRequest(hello=hello))
        next(stream)  # the session is open and holds the stream
        with pytest.raises(grpc.RpcError) as caught:
            stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # Its own connection (channels to one target share connections unless told otherwise).
        with grpc.insecure_channel(process.address, options=[("grpc.use_local_subchannel_pool", 1)]) as other:
            hostile.stubs_for(other).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10)
        feed.put(None)
