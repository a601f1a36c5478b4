"""How ``namesrv`` starts its children: forked from one fork server that imported their modules once.

Each child (the route-table process, every serving process, a serving process started again) is
forked by a fork server (:mod:`multiprocessing`'s ``forkserver`` start method) that imported the
children's modules (grpc, protobuf, prometheus-client, the route table, both doors) once, when
``namesrv`` started its first child. A child forked from it starts with those imports done: a
started-again serving process serves ~0.1 s after its fork, and a ``namesrv`` start costs one import of
those modules instead of one per child (a child's imports are ~0.45 CPU-s, most of its start;
docs/development.md).

The fork server is a single-threaded process of its own, started by the supervisor, that has
done nothing but import: no thread, no socket, no gRPC channel or server is ever made in it, so
forking it is safe where forking the supervisor (which runs threads) would not be. Each child gets
only its end of its control socketpair (passed to the fork server over a Unix socket), stdin and
stdout on ``/dev/null`` and the supervisor's stderr for its log; it is a child of the fork server,
which reports its exit status to the supervisor (:class:`ChildProcess`). ``ps`` shows each child by
its title (``namesrv: serving process 1 (namesrv_grpc.processes.serving_process)``, set with
setproctitle; the fork server's own, ``namesrv: fork server``, is set by :mod:`.fork_server_init`,
which also has it ignore SIGTERM and SIGHUP). When the supervisor dies, the fork server exits, and
each child with it (``PR_SET_PDEATHSIG``, :func:`~namesrv_grpc.processes.child.die_with_parent`);
when the fork server dies, its children go with it and the supervisor stops with exit code 1, as
for a dead route-table process.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import signal
import socket
import time
from multiprocessing.process import BaseProcess

import psutil

CHILD_MODULES = {
    "route_table": "namesrv_grpc.processes.route_table_process",
    "serving": "namesrv_grpc.processes.serving_process",
}
"""The module whose ``main(["--control-fd", N])`` runs a child of each role."""

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["namesrv_grpc.processes.fork_server_init", *CHILD_MODULES.values()])


def title(role: str, index: int) -> str:
    """The process title ``ps`` shows for a child: ``namesrv: serving process 1
    (namesrv_grpc.processes.serving_process)``."""
    name = "route-table process" if role == "route_table" else f"serving process {index}"
    return f"namesrv: {name} ({CHILD_MODULES[role]})"


def _child_main(role: str, index: int, control: socket.socket) -> None:
    """What a forked child runs (in the child): SIGTERM and SIGHUP back to their defaults (the fork
    server ignores them), its title, stdout on /dev/null, then its module's ``main``. Leaves with
    SystemExit(the exit code)."""
    import setproctitle

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    setproctitle.setproctitle(title(role, index))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    module = importlib.import_module(CHILD_MODULES[role])
    raise SystemExit(module.main(["--control-fd", str(control.detach())]))


class ChildProcess:
    """A child forked by the fork server, with what the supervisor uses of
    :class:`asyncio.subprocess.Process`: :attr:`pid`, :attr:`returncode` (None while it runs; minus
    the signal number when a signal ended it), :meth:`wait`, :meth:`send_signal`,
    :meth:`terminate` and :meth:`kill`. Its exit is seen on the event loop only (the process's
    sentinel, read once), so :attr:`returncode` may be read from any thread."""

    def __init__(self, process: BaseProcess, loop: asyncio.AbstractEventLoop) -> None:
        self._process = process
        self._loop = loop
        self.pid: int = process.pid or 0
        self.returncode: int | None = None
        """Set when its exit was seen. 255 also when the fork server died: it reports its children's
        exits, and takes them with it (:func:`alive`)."""
        self.fork_server_pid = _parent_of(self.pid)
        """The fork server that forked it (0: unknown, the child had already gone)."""
        self._exited: asyncio.Future[int] = loop.create_future()
        self._sentinel = process.sentinel
        loop.add_reader(self._sentinel, self._on_sentinel)

    def _on_sentinel(self) -> None:
        code = self._process.exitcode
        if code is None:  # woken without the status yet
            return
        self._loop.remove_reader(self._sentinel)
        self.returncode = code
        self._process.close()
        self._exited.set_result(code)

    async def wait(self) -> int:
        """Wait until the child exited; return its :attr:`returncode`. Any number may wait at once."""
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child unless it has exited (then nothing happens)."""
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _parent_of(pid: int) -> int:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return 0


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet waited for, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def fork_server_died(child: ChildProcess) -> bool:
    """Whether ``child``, seen to have exited, went because its fork server died. The status 255
    is what the supervisor sees then, possibly while the fork server is still exiting: for that
    status, this waits up to :data:`FORK_SERVER_EXIT_SECONDS` for it to be gone."""
    if not child.fork_server_pid:
        return False
    deadline = time.monotonic() + (FORK_SERVER_EXIT_SECONDS if child.returncode == 255 else 0)
    while alive(child.fork_server_pid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


FORK_SERVER_EXIT_SECONDS = 2.0
"""How long a child's status 255 may precede its fork server's death becoming visible (a killed
process closes its descriptors, which tells the supervisor, before it becomes a zombie)."""


async def start_child(role: str, index: int, control: socket.socket) -> ChildProcess:
    """Fork a child of ``role`` (``route_table`` or ``serving``, number ``index``) from the fork
    server, handing it ``control`` (its end of the control socketpair; the caller closes its own
    copy). The first call starts the fork server, which imports :data:`CHILD_MODULES` before it
    forks (~0.5 s); later ones wait only for the fork. This runs on the event loop, as does the
    reading of every child's exit status: multiprocessing reads a status once, and two threads
    reading it at once could both get it. Raises OSError when the fork server cannot be reached."""
    process = _CONTEXT.Process(target=_child_main, args=(role, index, control), name=title(role, index), daemon=True)
    process.start()
    return ChildProcess(process, asyncio.get_running_loop())
