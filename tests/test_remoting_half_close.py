"""A remoting peer's end of input (issue 30, "half-close"): Netty closes a channel at end of input
(``ALLOW_HALF_CLOSURE`` false), and so does the NameServer, at once, removing the brokers registered
over the connection (S15), also when the connection is not being read (a peer that stopped reading
its answers, then half-closed: ``EPOLLRDHUP``), and over TLS. A peer whose end of input cannot even
arrive (its own unsent bytes are stuck ahead of it) goes at the idle timeout, unread answers dropped.

Real NameServer processes, real sockets, ``sock.shutdown(SHUT_WR)``."""

from __future__ import annotations

import fcntl
import socket
import ssl
import struct
import termios
import time
from pathlib import Path

from namesrv_grpc.remoting.codec import encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, poll_until, running_namesrv
from tests.test_security_remoting import register_body, register_fields
from tests.tls_support import TestCA

BROKER_ADDR = "127.0.0.1:10911"


def register(client: RemotingTestClient, topics: int = 2) -> None:
    body = register_body(topics=tuple(f"Topic-{i:04d}" for i in range(topics)))
    answer = client.call(RequestCode.REGISTER_BROKER, register_fields("broker-h", BROKER_ADDR, body), body)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def registered(server: NamesrvProcess, context: ssl.SSLContext | None = None) -> bool:
    """Whether broker-h is in the cluster info (asked on a connection of its own)."""
    with RemotingTestClient(server.remoting_address) as probe:
        if context is not None:
            probe.sock = context.wrap_socket(probe.sock, server_hostname="localhost")
        answer = probe.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    return BROKER_ADDR.encode() in answer.body


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes in the socket's send queue not yet acknowledged by the peer (``SIOCOUTQ``)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0])


def flood_without_reading(client: RemotingTestClient, requests: int) -> None:
    """Pipeline ``requests`` GET_ALL_TOPIC_LIST_FROM_NAMESERVER (each answered with every topic) and
    read none of the answers: the server's unsent answers pass ``writeBufferHighWaterMark`` and it
    stops reading the connection. Waits until the server received every byte sent."""
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    frames = b"".join(
        encode_command(client.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)) for _ in range(requests)
    )
    client.sock.sendall(frames)
    poll_until(lambda: unsent_bytes(client.sock) == 0, timeout=10)


def test_a_half_closed_connection_is_closed_and_its_broker_removed(tmp_path: Path) -> None:
    with running_namesrv(tmp_path) as server:
        client = RemotingTestClient(server.remoting_address)
        register(client)
        assert registered(server)
        client.sock.shutdown(socket.SHUT_WR)
        assert client.wait_closed(10)
        poll_until(lambda: not registered(server), timeout=10)  # the idle timeout is 120 s
        client.close()


def test_a_half_close_while_the_connection_is_not_read_closes_it_at_once(tmp_path: Path) -> None:
    metrics_port = free_port()
    with running_namesrv(tmp_path, "--metrics-port", str(metrics_port)) as server:
        client = RemotingTestClient(server.remoting_address)
        register(client, topics=2000)  # GET_ALL_TOPIC_LIST answers of ~40 KB each
        flood_without_reading(client, 300)
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        poll_until(lambda: scrape(url).value("namesrv_remoting_reads_paused_total", reason="write_buffer") >= 1, 10)
        assert registered(server)
        client.sock.shutdown(socket.SHUT_WR)
        poll_until(lambda: not registered(server), timeout=10)  # the idle timeout is 120 s
        assert scrape(url).value("namesrv_remoting_end_of_input_total", reading="paused") == 1
        client.close()


def test_an_idle_connection_whose_answers_are_not_read_is_closed(tmp_path: Path) -> None:
    """No FIN can reach the server (none is sent here): the idle timeout closes the connection,
    dropping the answers its peer never read (a graceful close would wait for them for ever)."""
    config = tmp_path / "namesrv.conf"
    config.write_text("serverChannelMaxIdleTimeSeconds=2\n")
    with running_namesrv(tmp_path, "-c", str(config)) as server:
        client = RemotingTestClient(server.remoting_address)
        register(client, topics=2000)
        flood_without_reading(client, 300)
        started = time.monotonic()
        poll_until(lambda: not registered(server), timeout=20)
        assert time.monotonic() - started >= 1  # removed by the idle timeout, not before
        client.close()


def test_a_half_closed_tls_connection_is_closed_and_its_broker_removed(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    issued = ca.server()
    health_port = free_port()
    args = ["--tls-cert-file", str(issued.cert_file), "--tls-key-file", str(issued.key_file)]
    with running_namesrv(tmp_path / "ns", *args, "--health-port", str(health_port), health_port=health_port) as server:
        context = ssl.create_default_context(cafile=str(ca.cert_file))
        client = RemotingTestClient(server.remoting_address)
        client.sock = context.wrap_socket(client.sock, server_hostname="localhost")
        register(client)
        assert registered(server, context)
        socket.socket.shutdown(client.sock, socket.SHUT_WR)  # a FIN without TLS close_notify
        poll_until(lambda: not registered(server, context), timeout=10)
        client.close()
