"""No client can starve the others (issue 20): every attack of the issue, scaled down, against a real
NameServer process over loopback while a well-behaved client looks a topic up on both doors.

Each test asserts what is stable on a loaded box: the bound acted (refusals, closed connections,
paused reads in the metrics), the server's peak RSS and log stayed small, and the well-behaved
client kept getting answers (a generous per-lookup timeout, no latency figure: those are measured at
full size by ``python -m bench.remoting_hostile``, docs/benchmarks.md). The attacks are the bench's
own functions (:mod:`bench.remoting_hostile`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench import remoting_hostile as attacks
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from tests.metrics_support import Scrape, free_port, parse
from tests.support import NamesrvProcess, poll_until, running_namesrv

MIB = 1024 * 1024

LIMITS = {
    "maxConnections": "40",
    "remotingFrameReadTimeoutMillis": "1500",
    "remotingPartialFramesMaxBytes": str(8 * MIB),
    "peerLogLinesPerKind": "5",
    "grpcMaxConnections": "8",
}
"""Small enough for the scaled-down attacks to reach them."""


class Server:
    def __init__(self, process: NamesrvProcess, metrics_port: int) -> None:
        self.process = process
        self.metrics_port = metrics_port
        self.remoting = process.remoting_address
        self.grpc = process.address

    def scrape(self) -> Scrape:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            return parse(response.read().decode())

    def peak_rss(self) -> dict[int, int]:
        return attacks._peak_rss(self.process.process.pid)

    def log_size(self) -> int:
        return self.process.stderr_path.stat().st_size

    def log(self) -> str:
        return self.process.stderr_path.read_text(errors="replace")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    config = tmp_path / "namesrv.conf"
    config.write_text("".join(f"{key}={value}\n" for key, value in LIMITS.items()))
    metrics_port = free_port()
    with running_namesrv(tmp_path, "-c", str(config), "--metrics-port", str(metrics_port)) as process:
        result = Server(process, metrics_port)
        attacks.register_topics(result.remoting)
        try:
            yield result
        finally:
            for sock in attacks._KEEP:
                sock.close()
            attacks._KEEP.clear()


def assert_answered(probe: attacks.ProbeResult) -> None:
    """The well-behaved client got answers on both doors, none failed (each lookup may take up to
    the probe's 10 s timeout: a loaded box must not fail the test; a starved server does)."""
    for door in (probe.remoting, probe.grpc):
        assert door.count >= 3, probe
        assert door.failed == 0, probe


@pytest.mark.parametrize(
    ("code", "ext"),
    [
        (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
        (RequestCode.GET_NAMESRV_CONFIG, None),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": attacks.PROBE_TOPIC}),
    ],
)
def test_pipelined_requests_whose_answers_are_never_read(server: Server, code: int, ext: dict[str, str] | None) -> None:
    """Unbounded, 4 x 256 KiB of pipelined GET_ALL_TOPIC_LIST (about 10,000 requests, 30 KB of answer
    each) made the server build and hold about 300 MB of answers; now each connection stops being
    read once 64 KiB of answers wait (writeBufferHighWaterMark)."""
    before = server.peak_rss()
    with attacks.probing(server.remoting, server.grpc) as probe:
        socks = attacks.pipeline_unread(server.remoting, code, 4, 256 * 1024, ext)
        time.sleep(2)
    assert_answered(probe)
    assert attacks._peak_growth(before, server.peak_rss()) < 80 * MIB
    metrics = server.scrape()
    # 256 KiB reads of thousands of requests: handled 16 per turn of the loop, the rest waits
    assert metrics.value("namesrv_remoting_reads_paused_total", reason="backlog") >= 4
    if code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:  # the others' answers fit the kernel's buffers
        assert metrics.value("namesrv_remoting_reads_paused_total", reason="write_buffer") >= 4
    for sock in socks:
        sock.close()


def test_idle_connection_flood_cannot_lock_brokers_out(server: Server) -> None:
    """maxConnections 40: a flood of 150 idle connections keeps at most 40 open (the oldest idle ones
    make room), a broker connecting afterwards still registers, and the log stays small."""
    log_before = server.log_size()
    with attacks.probing(server.remoting, server.grpc) as probe:
        socks = attacks.idle_flood(server.remoting, 150)
        poll_until(lambda: server.scrape().value("namesrv_remoting_connections") <= 40, 10)
        sock = attacks.connect(server.remoting)
        answer = attacks.call(sock, attacks.frame(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 1))
        assert answer.code == ResponseCode.SUCCESS
        sock.close()
    assert_answered(probe)
    assert attacks.open_count(socks) <= 40
    metrics = server.scrape()
    assert metrics.value("namesrv_remoting_connections_refused_total", reason="idle_evicted") >= 100
    assert metrics.value("namesrv_remoting_max_connections") == 40
    assert server.log_size() - log_before < 20_000
    assert metrics.value("namesrv_log_lines_suppressed_total", logger="namesrv_grpc.remoting.budget") > 0
    for flood_sock in socks:
        flood_sock.close()


def test_slow_frames_are_closed_and_their_memory_released(server: Server) -> None:
    """6 connections each holding 2 MiB of a declared 16 MiB frame, one more byte every 0.3 s:
    beyond remotingPartialFramesMaxBytes (8 MiB) the largest holders are closed at once, the rest
    when their frame is 1.5 s old (the trickle does not restart the deadline), and the bytes held
    return to 0."""
    with attacks.probing(server.remoting, server.grpc) as probe:
        socks = attacks.slow_frames(server.remoting, 6, 16 * MIB, 2 * MIB)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and attacks.open_count(socks):
            attacks.trickle(socks)
            time.sleep(0.3)
    assert_answered(probe)
    assert attacks.open_count(socks) == 0
    metrics = server.scrape()
    assert metrics.value("namesrv_remoting_frames_refused_total", reason="partial_frames_budget") >= 1
    assert metrics.value("namesrv_remoting_frames_refused_total", reason="frame_timeout") >= 1
    assert metrics.value("namesrv_remoting_partial_frame_bytes") == 0
    for sock in socks:
        sock.close()


def test_unknown_request_codes_do_not_fill_the_log(server: Server) -> None:
    """20,000 frames of an unknown code are each answered REQUEST_CODE_NOT_SUPPORTED, but the log
    gets a handful of lines and a count of the rest (unbounded: one WARNING line each, 2 MB)."""
    log_before = server.log_size()
    with attacks.probing(server.remoting, server.grpc) as probe:
        assert attacks.unknown_codes(server.remoting, 20_000) == 20_000
    assert_answered(probe)
    assert server.log_size() - log_before < 10_000
    suppressed = server.scrape().value("namesrv_log_lines_suppressed_total", logger="namesrv_grpc.remoting.handlers")
    assert suppressed >= 19_000


def test_pipelined_compressed_registration_bombs(server: Server) -> None:
    """12 pipelined REGISTER_BROKER bodies of 1 MiB of zlib that inflate to 1 GiB: each is refused
    after inflating registerBodyMaxInflatedSize (64 MiB), two at a time, so the peak RSS grows by
    about 128 MiB, not one 64 MiB per worker thread."""
    bomb = attacks.deflate_bomb(1)
    before = server.peak_rss()
    with attacks.probing(server.remoting, server.grpc) as probe:
        codes = attacks.register_bombs(server.remoting, 12, bomb)
    assert_answered(probe)
    assert len(codes) == 12
    assert ResponseCode.SUCCESS not in codes
    assert attacks._peak_growth(before, server.peak_rss()) < 240 * MIB


def test_wide_json_header_is_refused_before_parsing(server: Server) -> None:
    """A 4 MiB JSON header ``[[],[],...]`` (1.4 million values, a second of CPU to parse) is refused
    when its length arrives (remotingHeaderMaxLength, 1 MiB): nothing of it is held; a 900 KiB one
    (300,000 values) by counting its commas and brackets (remotingHeaderMaxFields). Each connection
    is closed."""
    with attacks.probing(server.remoting, server.grpc) as probe:
        for size in (4 * MIB, 4 * MIB, 900 * 1024):
            sock = attacks.connect(server.remoting)
            with contextlib.suppress(ConnectionError):  # closed while the rest is still being sent
                sock.sendall(attacks.wide_header(size))
            sock.settimeout(10)
            with contextlib.suppress(ConnectionError):
                assert sock.recv(1) == b""
            sock.close()
    assert_answered(probe)
    log = server.log()
    assert "remotingHeaderMaxLength" in log
    assert "remotingHeaderMaxFields" in log
    assert server.scrape().value("namesrv_remoting_frames_refused_total", reason="header_too_large") == 3


def test_data_version_counter_out_of_range_is_a_clean_refusal(server: Server) -> None:
    """A DataVersion counter of 10^5000 is answered with an error naming the problem (SYSTEM_ERROR,
    the code RocketMQ answers a body it cannot decode with), and no traceback is logged."""
    sock = attacks.connect(server.remoting)
    answer = attacks.call(sock, attacks.huge_counter_query())
    sock.close()
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "4300 digits" in (answer.remark or "")
    assert "Traceback" not in server.log()


def test_grpc_connection_flood_is_capped_and_remoting_keeps_answering(server: Server) -> None:
    """grpcMaxConnections 8: of 20 more gRPC connections some are closed at once, so a flood on the
    gRPC door cannot take the file descriptors of the remoting door; the well-behaved client's
    connections (made before) keep answering on both doors."""
    channels = []
    codes: list[grpc.StatusCode] = []
    with attacks.probing(server.remoting, server.grpc) as probe:
        for _ in range(20):
            channel = grpc.insecure_channel(server.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
            channels.append(channel)
            try:
                stub = ns_grpc.NameServerServiceStub(channel)
                stub.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5)
            except grpc.RpcError as error:
                codes.append(error.code())
    assert_answered(probe)
    assert len(codes) >= 12
    assert set(codes) == {grpc.StatusCode.UNAVAILABLE}
    for channel in channels:
        channel.close()


@pytest.mark.parametrize("broker_id", ["1" + "0" * 30, "9223372036854775808", "1" * 5000])
def test_header_numbers_out_of_range_are_a_clean_refusal(server: Server, broker_id: str) -> None:
    """A brokerId beyond a Java long (which Long.parseLong refuses) is refused naming the field;
    before, 10^30 was stored and every route of the broker carried it."""
    ext = {
        "brokerName": "broker-big-id",
        "brokerAddr": "127.0.0.1:30911",
        "clusterName": "DefaultCluster",
        "brokerId": broker_id,
        "bodyCrc32": "0",
    }
    sock = attacks.connect(server.remoting)
    answer = attacks.call(sock, attacks.frame(RequestCode.REGISTER_BROKER, 1, ext))
    clusters = attacks.call(sock, attacks.frame(RequestCode.GET_BROKER_CLUSTER_INFO, 2))
    sock.close()
    assert answer.code != ResponseCode.SUCCESS
    assert "brokerId" in (answer.remark or "")
    assert "Java long" in (answer.remark or "")
    assert b"broker-big-id" not in clusters.body
    assert "Traceback" not in server.log()


def test_grpc_calls_in_flight_are_capped(tmp_path: Path) -> None:
    """grpcMaxConcurrentCalls 3: with three watches open a fourth call is RESOURCE_EXHAUSTED at once,
    not queued; when a watch ends, calls are answered again."""
    config = tmp_path / "namesrv.conf"
    config.write_text("grpcMaxConcurrentCalls=3\n")
    with running_namesrv(tmp_path, "-c", str(config)) as process, grpc.insecure_channel(process.address) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        watches = [stub.WatchTopicRoutes(ns_pb2.WatchTopicRoutesRequest(topics=["T"]), timeout=30) for _ in range(3)]
        for watch in watches:
            next(iter(watch))  # the first message: the watch is open
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        watches[0].cancel()
        poll_until(lambda: _answers(stub), 10)
        for watch in watches[1:]:
            watch.cancel()


def _answers(stub: ns_grpc.NameServerServiceStub) -> bool:
    try:
        stub.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5)
    except grpc.RpcError:
        return False
    return True


def test_the_kernel_queues_a_burst_of_connections_while_the_server_is_busy(tmp_path: Path) -> None:
    """The listening socket's accept queue is RocketMQ's 1,024 (``serverSocketBacklog``) although
    asyncio accepts only 64 per turn of the loop: 300 clients connecting while the server is stopped
    are all taken (with a queue of 64 most would time out), and answered once it runs again."""
    with running_namesrv(tmp_path) as process:
        host, port = process.remoting_address.rsplit(":", 1)
        os.kill(process.process.pid, signal.SIGSTOP)
        socks: list[socket.socket] = []
        try:
            for _ in range(300):
                sock = socket.socket()
                sock.settimeout(0.5)
                try:
                    sock.connect((host, int(port)))
                except OSError:
                    sock.close()
                    continue
                socks.append(sock)
        finally:
            os.kill(process.process.pid, signal.SIGCONT)
        assert len(socks) >= 290
        answer = attacks.call(socks[-1], attacks.frame(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 1))
        assert answer.code == ResponseCode.SUCCESS
        for sock in socks:
            sock.close()


def test_connections_from_one_address_are_bounded_and_a_new_client_still_gets_in(tmp_path: Path) -> None:
    """remotingMaxConnectionsPerIp 20: 60 connections from 127.0.0.1 that send one lookup each and
    then idle keep at most 20 open (each serving process holds its share; the least recently active
    makes room), and a client connecting afterwards is answered."""
    config = tmp_path / "namesrv.conf"
    config.write_text("remotingMaxConnectionsPerIp=20\n")
    metrics_port = free_port()
    with running_namesrv(tmp_path, "-c", str(config), "--metrics-port", str(metrics_port)) as process:
        lookup = attacks.frame(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 1)
        socks = []
        for _ in range(60):
            sock = attacks.connect(process.remoting_address)
            with contextlib.suppress(ConnectionError, TimeoutError):
                attacks.call(sock, lookup, timeout=5)
            socks.append(sock)
        poll_until(lambda: attacks.open_count(socks) <= 20, 10)
        fresh = attacks.connect(process.remoting_address)
        assert attacks.call(fresh, lookup).code == ResponseCode.SUCCESS
        fresh.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            metrics = parse(response.read().decode())
        assert metrics.value("namesrv_remoting_connections_refused_total", reason="per_ip_evicted") >= 40
        for sock in socks:
            sock.close()
