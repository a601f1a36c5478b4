"""The watchdog: ``namesrv`` asks each child once a second whether its event loop turns, over the
control link it already has (a ``ping`` call answered from the child's loop), and acts on silence.

A process that exits is seen at once (the supervisor waits on it); one that is stopped (SIGSTOP, a
debugger), starved or stuck in a loop that never yields is not: its sockets stay in the
``SO_REUSEPORT`` group and take new connections that nobody answers, and health said SERVING
(issue 39). What the supervisor does with a silence (:class:`~namesrv_grpc.processes.supervisor.Supervisor`):

- serving process silent ``processHeartbeatTimeoutMillis`` (10 s): killed (SIGKILL works on a
  stopped process too), which takes its sockets out of the group at once, and started again;
- route-table process silent ``processHeartbeatTimeoutMillis``: every serving process answers
  health NOT_SERVING and ``/ready`` 503 until it answers again; silent
  ``routeTableHeartbeatExitMillis`` (60 s): killed, and ``namesrv`` exits 1 as when it dies.

The bounds are far above a legitimate pause: the largest registration (200,000 topics,
``registerBodyMaxTopics``) takes 2.1 s end to end on an idle 2-core machine (docs/limits.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from namesrv_grpc.processes.channel import Channel

HEARTBEAT_INTERVAL_SECONDS = 1.0
"""How often each child is asked, and how often a missing answer is looked at."""
STALE_AFTER_SECONDS = 2.0
"""A child silent this long is not asked for its metrics: its last values stand in (a scrape never
waits for a stopped process)."""


async def watch(
    control: Channel,
    silent: Callable[[float], bool],
    answered: Callable[[], None],
    interval: float = HEARTBEAT_INTERVAL_SECONDS,
) -> None:
    """Ask ``control``'s other end ``ping`` every ``interval`` s. While an answer is missing, call
    ``silent(seconds since asked)`` every ``interval``; it returns False once it acted (the process
    is killed), which ends the watch. Each answer calls ``answered()``. Returns when the link closes."""
    loop = asyncio.get_running_loop()
    while not control.closed:
        asked = loop.time()
        ping = asyncio.ensure_future(control.call("ping"))
        try:
            while True:
                done, _ = await asyncio.wait({ping}, timeout=interval)
                if done:
                    break
                if not silent(loop.time() - asked):
                    return
        finally:
            if not ping.done():
                ping.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                    await ping
        if ping.cancelled() or ping.exception() is not None:
            return  # the link closed: the process is gone, the supervisor sees it exit
        answered()
        await asyncio.sleep(interval)
