"""What every child process of ``namesrv`` shares: how it is started, what it is told, and how it
talks to the supervisor.

A child is forked by the fork server (:mod:`.fork_server`) and runs its module's ``main(["--control-fd",
N])`` (``python -m namesrv_grpc.processes.route_table_process --control-fd N``, or
``serving_process``, runs the same by hand): fd N is its end of a socketpair with the supervisor, a
:class:`~namesrv_grpc.processes.channel.Channel` over which the supervisor sends the
:class:`ProcessParams` first and later asks for metrics, and the child says when it is ready.
The child dies with the supervisor (``PR_SET_PDEATHSIG``) and logs to the inherited stderr in the
supervisor's format.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.processes.channel import Channel
from namesrv_grpc.runtime.log_format import configure_logging

ROUTE_TABLE_SOCKET = "route-table.sock"
"""The route-table process's Unix socket, in the run directory (serving processes connect to it)."""

LEDGER_FILE = "ledger"
"""What every serving process holds (:mod:`.ledger`), in the run directory."""


@dataclass(frozen=True, slots=True)
class ProcessParams:
    """What the supervisor tells a child when it starts."""

    config: NamesrvConfig
    run_dir: str
    """A directory only this user may enter: the route-table process's socket lives there."""
    started_monotonic: float
    """``time.monotonic()`` when ``namesrv`` started (the warm-up, ``needWaitForService``, counts from it)."""
    log_level: str = "INFO"
    log_format: str = "text"
    """``text`` or ``json`` (:mod:`namesrv_grpc.runtime.log_format`), as the supervisor logs."""
    index: int = 0
    """Serving processes: 1..N (the route-table process: 0)."""
    workers: int = 1
    """Serving processes in all."""
    remoting_port: int = 0
    """The remoting port every serving process listens on (``SO_REUSEPORT``), resolved by the supervisor."""
    grpc_port: int = 0
    """The gRPC port, likewise."""
    health_port: int = 0
    """The plaintext health port, likewise (0 = off)."""


def die_with_parent() -> None:
    """Ask Linux to send SIGTERM to this process when its parent exits (a supervisor killed with
    SIGKILL leaves no child behind). Elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class ControlLink:
    """A child's end of its control socketpair with the supervisor: receives the params, answers
    the supervisor's calls (``handlers``: method name -> function, sync or async), and notes when
    the supervisor is gone (:attr:`lost`)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.params: asyncio.Future[ProcessParams] = asyncio.get_running_loop().create_future()
        self.handlers: dict[str, Callable[..., Any]] = {"ping": lambda: None}
        """``ping`` is the watchdog's heartbeat (:mod:`.watchdog`): answered from this event loop."""
        self.lost = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        await self.channel.serve(self._on_message)
        self.lost.set()

    def _on_message(self, message: tuple[Any, ...]) -> None:
        if message[0] == "params":
            if not self.params.done():
                self.params.set_result(message[1])
            return
        if message[0] == "call":
            task = asyncio.create_task(self._answer(message[1], message[2], message[3]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, call_id: int, method: str, args: tuple[Any, ...]) -> None:
        handler = self.handlers.get(method)
        try:
            if handler is None:
                raise LookupError(f"no control method {method!r}")
            value = handler(*args)
            if asyncio.iscoroutine(value):
                value = await value
        except Exception as exc:
            self.channel.reply(call_id, False, exc)
        else:
            self.channel.reply(call_id, True, value)

    def tell(self, *message: Any) -> None:
        """Send the supervisor a one-way message (e.g. ``("ready", ...)``); a lost link drops it."""
        if not self.channel.closed:
            self.channel.send(message)


def fix_malloc_mmap_threshold(threshold: int = 1024 * 1024) -> bool:
    """glibc only: allocations of ``threshold`` bytes or more always get their own mapping, returned
    to the system when freed. glibc's default raises the threshold (up to 32 MiB) each time such a
    block is freed, after which large buffers (a 16 MiB frame, an inflated registration body) come
    from per-thread heaps and stay resident for good (issue 20: pipelined deflate bombs left
    +750 MB). Every child of ``namesrv`` sets it at start. Returns whether it was set."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_mmap_threshold = -3
    return bool(libc.mallopt(m_mmap_threshold, threshold))


def run_child(argv: Sequence[str] | None, main: Callable[[ProcessParams, ControlLink], Awaitable[int]]) -> int:
    """Start a child: parse ``--control-fd``, receive the params, set up logging, run ``main``.
    Returns its exit code."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--control-fd", type=int, required=True)
    args = parser.parse_args(argv)
    die_with_parent()
    fix_malloc_mmap_threshold()

    async def start() -> int:
        sock = socket.socket(fileno=args.control_fd)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 20)
        control = ControlLink(Channel(reader, writer, "supervisor"))
        params = await control.params
        configure_logging(params.log_level, params.log_format)
        return await main(params, control)

    from namesrv_grpc.runtime.event_loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(start())
