"""A blocking RocketMQ remoting client for tests: one TCP connection to a real NameServer process,
built on the project's codec (frames) but nothing of the server."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping

from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import FLAG_ONEWAY, SerializeType


class RemotingTestClient:
    """``call`` sends a request and waits for the answer with the same opaque; ``send_raw`` writes any
    bytes; ``wait_closed`` tells whether the server closed the connection."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self._pending: dict[int, RemotingCommand] = {}
        self._opaque = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RemotingTestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        serialize_type: int = SerializeType.JSON,
        version: int = 479,
        oneway: bool = False,
        language: str = "JAVA",
    ) -> RemotingCommand:
        """A request command with the next opaque."""
        self._opaque += 1
        return RemotingCommand(
            code,
            self._opaque,
            FLAG_ONEWAY if oneway else 0,
            None,
            dict(ext_fields or {}),
            body,
            language,
            version,
            serialize_type,
        )

    def send(self, command: RemotingCommand) -> None:
        self.sock.sendall(encode_command(command))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"", **kw: object
    ) -> RemotingCommand:
        """Send one request and return its answer."""
        command = self.request(code, ext_fields, body, **kw)  # type: ignore[arg-type]
        self.send(command)
        return self.receive(command.opaque)

    def receive(self, opaque: int, timeout: float | None = None) -> RemotingCommand:
        """The answer with ``opaque`` (answers to other opaques are kept). Raises TimeoutError,
        ConnectionError when the server closes first."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while opaque not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer with opaque {opaque}")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                raise TimeoutError(f"no answer with opaque {opaque}") from None
            if not data:
                raise ConnectionError("the server closed the connection")
            for answer in self._decoder.feed(data):
                self._pending[answer.opaque] = answer
        return self._pending.pop(opaque)

    def nothing_within(self, seconds: float) -> bool:
        """True when no byte arrives within ``seconds`` (and the connection stays open)."""
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(1 << 16)
        except TimeoutError:
            return True
        if data:
            self._pending.update((a.opaque, a) for a in self._decoder.feed(data))
        return False

    def wait_closed(self, timeout: float = 10.0) -> bool:
        """True when the server closes the connection within ``timeout`` (answers before that are kept)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not data:
                return True
            self._pending.update((a.opaque, a) for a in self._decoder.feed(data))
