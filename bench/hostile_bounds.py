"""The attacks of issue 30 that are not HTTP/2 tricks (those are in :mod:`bench.grpc_attacks`), as
scenario 12 of ``make bench`` runs them (:mod:`bench.remoting_hostile`): remoting connections that
each send a lookup and then idle, a route table filled by anonymous registrations, a flood of KV
writes, wrong signatures over 16 MiB bodies, stalled connections and scrape loops on the metrics
port, and a peer that half-closes after registering a broker. Each is a module-level function of
the server's addresses and its sizes (picklable, run in an attacker process of its own); the
set-ups and checks the bench runs itself are here too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import Future

import grpc

from bench.grpc_attacks import connect_from
from bench.harness import run_threads
from bench.remoting_hostile import MIB, PROBE_TOPIC, call, close_after, connect, frame, open_count
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.wire.grpc_register_body import encode_body

BIG_BROKER = "broker-big"
BIG_CLUSTER = "BigCluster"
LARGE_ANSWERS = [("grpc.max_receive_message_length", 64 * MIB), ("grpc.max_send_message_length", 64 * MIB)]


def register_grpc(
    address: str,
    broker_name: str,
    broker_addr: str,
    topics: list[str],
    *,
    cluster: str = "DefaultCluster",
    heartbeat_timeout_millis: int = 0,
    compress: bool = False,
    timeout: float = 120,
) -> None:
    """Register ``broker_name`` with ``topics`` over gRPC (a new DataVersion each time)."""
    body, crc = encode_body(
        {t: TopicConfig(t, 4, 4) for t in topics}, DataVersion(0, time.time_ns() // 1000, 1), compress=compress
    )
    request = ns_pb2.RegisterBrokerRequest(
        cluster_name=cluster, broker_name=broker_name, broker_id=0, broker_addr=broker_addr, body=body,
        body_crc32c=crc, compressed=compress, heartbeat_timeout_millis=heartbeat_timeout_millis,
    )  # fmt: skip
    with grpc.insecure_channel(address, options=LARGE_ANSWERS) as channel:
        ns_grpc.NameServerServiceStub(channel).RegisterBroker(request, timeout=timeout)


def big_table(grpc_address: str, topics: int) -> None:
    """A set-up: broker ``broker-big`` of cluster ``BigCluster`` with ``topics`` topics, over gRPC
    (compressed; it stays registered for an hour)."""
    names = [f"BigTopic-{i:07d}" for i in range(topics)]
    register_grpc(
        grpc_address, BIG_BROKER, "127.0.0.1:10931", names, cluster=BIG_CLUSTER, heartbeat_timeout_millis=3_600_000,
        compress=True,
    )  # fmt: skip


def fill_kv(grpc_address: str, total: int) -> None:
    """A set-up: KV entries of 64,000 characters in namespace ``FILL`` up to about ``total`` bytes."""
    with grpc.insecure_channel(grpc_address) as channel:
        stub = kv_grpc.KVConfigServiceStub(channel)
        for i in range(max(1, total // 64_000)):
            stub.PutKVConfig(
                kv_pb2.PutKVConfigRequest(namespace="FILL", key=f"fill-{i:03d}", value="v" * 64_000), timeout=30
            )


# --------------------------------------------------------------------------- attacks


def attack_lookup_then_idle(remoting: str, count: int, seconds: float) -> str:
    """``count`` remoting connections that each send one lookup, read its answer and then idle."""
    lookup = frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, 1, {"topic": PROBE_TOPIC})
    socks: list[socket.socket] = []
    failed = 0
    for _ in range(count):
        try:
            sock = connect(remoting, 10)
        except OSError:
            failed += 1
            continue
        socks.append(sock)
        with contextlib.suppress(OSError, ConnectionError):
            call(sock, lookup, timeout=10)
    alive = close_after(socks, seconds)
    return f"{len(socks):,} connected ({failed} failed), {alive:,} still open after {seconds:g} s"


def attack_table_size(grpc_address: str, seconds: float, in_flight: int, topics: int) -> str:
    """Anonymous registrations of ever new brokers with 255-character names for ``seconds`` (``in_flight``
    at once), then one registration of ``topics`` topics with 127-character names (compressed)."""
    accepted = refused = 0
    others: dict[str, int] = {}
    with grpc.insecure_channel(grpc_address) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        body, crc = encode_body({}, DataVersion(0, 1, 1))
        deadline = time.monotonic() + seconds
        pending: list[Future[object]] = []
        index = 0
        while time.monotonic() < deadline:
            while len(pending) < in_flight:
                index += 1
                name = f"{index:08d}" + "n" * 247
                addr = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}:{10000 + index % 50000}"
                request = ns_pb2.RegisterBrokerRequest(
                    cluster_name="FloodCluster", broker_name=name, broker_id=0, broker_addr=addr, body=body,
                    body_crc32c=crc,
                )  # fmt: skip
                pending.append(stub.RegisterBroker.future(request, timeout=30))
            done = pending.pop(0)
            try:
                done.result()
                accepted += 1
            except grpc.RpcError as error:
                code = error.code().name
                if code == "RESOURCE_EXHAUSTED":
                    refused += 1
                else:
                    others[code] = others.get(code, 0) + 1
        for done in pending:
            with contextlib.suppress(grpc.RpcError):
                done.result()
    long_names = [f"{i:07d}" + "t" * 120 for i in range(topics)]
    try:
        register_grpc(grpc_address, "broker-long-topics", "127.0.0.1:10941", long_names, compress=True, timeout=300)
        big = "accepted"
    except grpc.RpcError as error:
        big = f"{error.code().name}: {(error.details() or '')[:70]}"
    return (
        f"{accepted:,} brokers registered, {refused:,} refused (RESOURCE_EXHAUSTED){f', {others}' if others else ''}; "
        f"{topics:,} topics of 127 characters: {big}"
    )


def answers_everyone(grpc_address: str, remoting: str) -> tuple[bool, str]:
    """A check after the table-size attack: the cluster info and the topic list are answered on both
    doors (to a new client)."""
    failures = []
    with grpc.insecure_channel(grpc_address, options=LARGE_ANSWERS) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        try:
            clusters = stub.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=30)
            brokers = len(clusters.broker_addr_table)
            topics = len(stub.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=30).topics)
        except grpc.RpcError as error:
            failures.append(f"gRPC {error.code().name}")
            brokers = topics = -1
    sock = connect(remoting, 30)
    try:
        for code in (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER):
            answer = call(sock, frame(code, int(code)), timeout=30)
            if answer.code != 0:
                failures.append(f"remoting {code.name} {answer.code}")
    except (OSError, ConnectionError) as exc:
        failures.append(f"remoting {type(exc).__name__}")
    finally:
        sock.close()
    text = f"afterwards: cluster info of {brokers:,} brokers and {topics:,} topics answered on both doors"
    return (not failures, text if not failures else f"afterwards failed: {', '.join(failures)}")


def attack_kv_flood(remoting: str, connections: int, pipelined: int, seconds: float) -> str:
    """``connections`` connections pipelining ``pipelined`` PUT_KV_CONFIG each, again and again for
    ``seconds`` (keys cycle over 40 a connection, values small)."""
    acknowledged = [0] * connections
    refused = [0] * connections
    deadline = time.monotonic() + seconds

    def flood(index: int) -> None:
        sock = connect(remoting, 30)
        decoder, opaque = FrameDecoder(), 0
        with contextlib.suppress(OSError, ConnectionError):
            while time.monotonic() < deadline:
                frames = []
                for _ in range(pipelined):
                    opaque += 1
                    fields = {"namespace": "flood", "key": f"c{index}-k{opaque % 40}", "value": f"v{opaque}"}
                    frames.append(encode_command(RemotingCommand(RequestCode.PUT_KV_CONFIG, opaque, 0, None, fields)))
                sock.sendall(b"".join(frames))
                answered = 0
                while answered < pipelined:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    for answer in decoder.feed(data):
                        answered += 1
                        if answer.code == 0:
                            acknowledged[index] += 1
                        else:
                            refused[index] += 1
        sock.close()

    run_threads(flood, connections, seconds + 60)
    return (
        f"{sum(acknowledged):,} KV writes acknowledged ({sum(acknowledged) / seconds:,.0f}/s), {sum(refused)} refused"
    )


def attack_bad_signatures(remoting: str, connections: int, body_size: int, seconds: float, source: str) -> str:
    """``connections`` connections from ``source`` sending REGISTER_BROKER with a ``body_size`` body
    and a wrong signature, one after the other, for ``seconds`` (at least one each)."""
    body = b"{" + b" " * (body_size - 2) + b"}"
    fields = {
        "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0", "brokerAddr": "127.0.0.1:10911",
        "haServerAddr": "", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        "AccessKey": "broker-a-ak", "Signature": base64.b64encode(b"not the signature at all!").decode(),
    }  # fmt: skip
    request = frame(RequestCode.REGISTER_BROKER, 1, fields, body)
    codes: dict[int, int] = {}
    deadline = time.monotonic() + seconds

    def send() -> None:
        host, port = remoting.rsplit(":", 1)
        sock = connect_from(source, host, int(port), timeout=60)
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                answer = call(sock, request, timeout=60)
                codes[answer.code] = codes.get(answer.code, 0) + 1
                if time.monotonic() > deadline:
                    break
        sock.close()

    run_threads(lambda _: send(), connections, seconds + 120)
    return f"{sum(codes.values())} wrongly signed {body_size / MIB:.0f} MiB registrations answered, codes {codes}"


def attack_metrics(metrics: str, stalled: int, loops: int, seconds: float) -> str:
    """``loops`` threads scraping ``/metrics`` as fast as they can for ``seconds``; halfway through,
    ``stalled`` connections to the metrics port that send half a request and stall."""
    host, port = metrics.rsplit(":", 1)
    scrapes = [[0, 0] for _ in range(loops)]
    """Per loop: scrapes answered before and after the stalled connections came."""
    failures = [0] * loops
    scraped_bytes = [0] * loops
    started = time.monotonic()
    half, deadline = started + seconds / 2, started + seconds

    def scrape(index: int) -> None:
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as response:
                    scraped_bytes[index] = len(response.read())
                scrapes[index][time.monotonic() >= half] += 1
            except (OSError, urllib.error.URLError):
                failures[index] += 1
                time.sleep(0.01)

    threads = [threading.Thread(target=scrape, args=(i,), daemon=True) for i in range(loops)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, half - time.monotonic()))
    socks = []
    for _ in range(stalled):
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: namesrv\r\n")
            socks.append(sock)
        except OSError:
            break
    for thread in threads:
        thread.join(seconds + 30)
    alive = open_count(socks)
    for sock in socks:
        sock.close()
    return (
        f"{sum(s[0] for s in scrapes):,} scrapes of {max(scraped_bytes) / 1024:,.0f} KiB, then with {len(socks)} "
        f"stalled connections ({alive} still open at the end) {sum(s[1] for s in scrapes):,} more, "
        f"{sum(failures):,} refused or failed"
    )


def _registered(remoting: str, broker_addr: str) -> bool:
    sock = connect(remoting, 10)
    try:
        answer = call(sock, frame(RequestCode.GET_BROKER_CLUSTER_INFO, 1), timeout=10)
    finally:
        sock.close()
    return broker_addr.encode() in answer.body


def attack_half_close(remoting: str, peers: int) -> tuple[str, bool]:
    """``peers`` remoting peers one after the other: each registers a broker and half-closes (TCP FIN,
    ``shutdown(SHUT_WR)``); the broker must be gone from the cluster info within 1 s."""
    took: list[float] = []
    for i in range(peers):
        broker_addr = f"127.0.0.1:{11000 + i}"
        topics = [f"HalfTopic-{i}", f"HalfTopic-{i}-b"]  # a first registration carries more than one
        body = json.dumps(
            {
                "filterServerList": [],
                "topicConfigSerializeWrapper": {
                    "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1},
                    "topicConfigTable": {
                        t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics
                    },
                },
            }
        ).encode()
        ext = {
            "brokerName": f"broker-half-{i}", "brokerAddr": broker_addr, "clusterName": "DefaultCluster",
            "brokerId": "0", "haServerAddr": "", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        }  # fmt: skip
        sock = connect(remoting, 10)
        answer = call(sock, frame(RequestCode.REGISTER_BROKER, 1, ext, body), timeout=10)
        if answer.code != 0 or not _registered(remoting, broker_addr):
            sock.close()
            return f"peer {i}: registration failed ({answer.code} {answer.remark})", False
        sock.shutdown(socket.SHUT_WR)
        started = time.monotonic()
        while _registered(remoting, broker_addr) and time.monotonic() - started < 10:
            time.sleep(0.01)
        took.append(time.monotonic() - started)
        sock.close()
    slowest = max(took)
    return f"{peers} brokers registered then half-closed: removed within {slowest * 1000:.0f} ms at most", slowest <= 1
