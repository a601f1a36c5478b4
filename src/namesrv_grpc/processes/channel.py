"""The link between a serving process and the route-table process: pickled messages, each framed by
its length, over a Unix stream socket (asyncio streams on both ends).

Only our own processes are at either end: the socket lives in a directory only the NameServer's user
may enter (the supervisor makes it with mode 0700), so no other user can connect and nothing from a
client's network ever crosses it unparsed (the doors pass decoded header fields and body bytes).

Messages are tuples whose first item names the kind:

    ("command", id, Command)        serving -> route table   a write (core.commands), answered by a reply
    ("call", id, method, args)      supervisor <-> child     a control method (metrics, ping, ...)
    ("reply", id, ok, value)        route table -> serving   its answer (or the error it raised)
    ("hello", index, pid)           serving -> route table   the first message
    ("state", Change, last)         route table -> serving   a piece of the state it starts from
    ("ready",)                      serving -> route table   it applied the last piece
    ("serve", seq)                  route table -> serving   serve once change ``seq`` is applied
    ("change", Change)              route table -> serving   the next change of the stream
    ("applied", seq)                serving -> route table   the change ``seq`` is in the replica
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!I")

MAX_MESSAGE_BYTES = 1 << 31
"""Largest message (a serving process's first change holds the whole table: ~100 bytes a topic)."""


SEND_BUFFER_BYTES = 4 << 20
"""Socket send buffer asked for (``SO_SNDBUF``, capped by ``net.core.wmem_max``): a busy event loop
moves at most this much per turn (a registration body of megabytes in one turn, not in ten)."""


class ChannelClosedError(ConnectionError):
    """The other end went away (it exited, or it was killed)."""


class RemoteError(RuntimeError):
    """An error of the other end that could not be sent as itself (not picklable)."""


def encode(message: tuple[Any, ...]) -> bytes:
    """One message as :meth:`Channel.send_encoded` sends it (pickled)."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


class Channel:
    """One end of the link: :meth:`send` a message, :meth:`call` a method of the other end and await
    its reply, :meth:`serve` to read messages until the link closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        self._reader = reader
        self._writer = writer
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # the kernel caps it at net.core.wmem_max
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self.name = name
        """What the other end is, for log lines ("route-table process", "serving process 1")."""
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.closed = False

    @classmethod
    async def connect(cls, path: str, name: str) -> Channel:
        """Connect to the Unix socket at ``path``. Raises OSError."""
        reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
        return cls(reader, writer, name)

    def send(self, message: tuple[Any, ...]) -> None:
        """Queue one message (never blocks; the transport buffers it). Raises ChannelClosedError."""
        self.send_encoded(encode(message))

    def send_encoded(self, data: bytes) -> None:
        """Queue one message :func:`encode` made (the same bytes for every serving process: a
        change is pickled once). Raises ChannelClosedError."""
        if self.closed:
            raise ChannelClosedError(f"the {self.name} is gone")
        self._writer.write(_LENGTH.pack(len(data)) + data)  # one send, not two

    @property
    def socket(self) -> socket.socket | None:
        """The link's socket (for the event loop's priority, :func:`namesrv_grpc.runtime.event_loop.prioritize`)."""
        sock: socket.socket | None = self._writer.get_extra_info("socket")
        return sock

    async def call(self, method: str, *args: Any) -> Any:
        """``method(*args)`` on the other end: its return value, or the error it raised (raised
        here). Raises ChannelClosedError when the link closes first."""
        return await self._request("call", method, args)

    async def command(self, command: Any) -> Any:
        """Have the other end apply ``command`` (a :class:`~namesrv_grpc.core.commands.Command`):
        its result, or the error it raised (raised here). Raises ChannelClosedError when the link
        closes first."""
        return await self._request("command", command)

    async def _request(self, kind: str, *items: Any) -> Any:
        """Send ``(kind, id, *items)`` and await the reply to ``id``."""
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            self.send((kind, call_id, *items))
            return await future
        finally:
            self._pending.pop(call_id, None)

    def reply(self, call_id: int, ok: bool, value: Any) -> None:
        """Answer call ``call_id`` with its value (``ok``) or the error it raised; an error that cannot
        be pickled goes as a :class:`RemoteError` naming it. A closed link drops the answer."""
        if self.closed:
            return
        try:
            self.send(("reply", call_id, ok, value))
        except (pickle.PicklingError, TypeError, AttributeError):
            self.send(("reply", call_id, False, RemoteError(f"{type(value).__name__}: {value}")))

    async def serve(self, on_message: Callable[[tuple[Any, ...]], None]) -> None:
        """Read messages until the link closes: replies resolve :meth:`call`; every other message
        goes to ``on_message`` (in order, on the event loop). Then every pending call fails with
        ChannelClosedError."""
        try:
            while True:
                header = await self._reader.readexactly(_LENGTH.size)
                (length,) = _LENGTH.unpack(header)
                if length > MAX_MESSAGE_BYTES:
                    raise ValueError(f"message of {length} bytes from the {self.name}")
                message = pickle.loads(await self._reader.readexactly(length))
                if message[0] == "reply":
                    future = self._pending.get(message[1])
                    if future is not None and not future.done():
                        if message[2]:
                            future.set_result(message[3])
                        else:
                            future.set_exception(message[3])
                    continue
                on_message(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.close()

    def close(self) -> None:
        """Close the link; pending calls fail with ChannelClosedError."""
        if self.closed:
            return
        self.closed = True
        self._writer.close()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosedError(f"the {self.name} is gone"))
        self._pending.clear()

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark."""
        if not self.closed:
            await self._writer.drain()
