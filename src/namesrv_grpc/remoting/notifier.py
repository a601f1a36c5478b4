"""The NameServer's only outgoing requests: ``NOTIFY_MIN_BROKER_ID_CHANGE`` to brokers (S53).

RocketMQ 5.x's NameServer tells the brokers of a broker name when its smallest broker id changes
(``RouteInfoManager.notifyMinBrokerIdChanged``: ``remotingClient.invokeOneway(brokerAddr, request,
300)``), so that with ``enableSlaveActingMaster`` a slave takes over as acting master at once (and
hands back when the master returns) instead of at its next ``GET_BROKER_MEMBER_GROUP`` poll. The
core decides when and whom to tell (:class:`~namesrv_grpc.core.model.MinBrokerIdChange`); this module
only delivers, over remoting, to the broker address as registered, whichever door the broker
registered through (a Java broker behind the agent listens on that address).

What the NameServer connects to, and why: only the addresses of registered brokers of a broker name
whose smallest id changed, only when ``notifyMinBrokerIdChanged=true`` (default off, as in RocketMQ),
one TCP connection per message, closed as soon as the frame is written. A registration is an
address anybody with broker rights can name, so every send is bounded:

- connect and write each within :data:`SEND_TIMEOUT_SECONDS` (300 ms, RocketMQ's timeout);
- at most :data:`MAX_IN_FLIGHT` sends (so connections) at once; a message beyond that is dropped
  and counted, never queued;
- never retried (the broker's own ``GET_BROKER_MEMBER_GROUP`` poll, every
  ``syncBrokerMemberGroupPeriod`` ms, catches up), never awaited by a request: the sender only
  schedules tasks on the event loop, from any thread;
- failures counted in ``namesrv_broker_notifications_total{result}`` and logged at most once per
  :data:`LOG_INTERVAL_SECONDS` (with how many were not logged).

Plain TCP only: a broker that requires TLS on its remoting port does not get the message (its poll
still catches up).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from namesrv_grpc.core.model import MinBrokerIdChange
from namesrv_grpc.remoting.codec import RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import FLAG_ONEWAY, NOTIFY_MIN_BROKER_ID_CHANGE

log = logging.getLogger(__name__)

SEND_TIMEOUT_SECONDS = 0.3
"""Connect timeout, and write timeout, of one notification (RocketMQ: ``invokeOneway(..., 300)``)."""
MAX_IN_FLIGHT = 64
"""Notifications (each with its own connection) in flight at once at most; more are dropped."""
LOG_INTERVAL_SECONDS = 10.0
"""At most one log line about failed or dropped notifications per this many seconds."""

NOTIFICATION_RESULTS = ("sent", "failed", "dropped")
"""Values of the ``result`` label of ``namesrv_broker_notifications_total``: written to the broker's
socket; connect or write failed or timed out; not sent (too many in flight, or the server stopping)."""


def notify_min_broker_id_change_command(change: MinBrokerIdChange, opaque: int = 0) -> RemotingCommand:
    """The one-way request RocketMQ's NameServer sends (``NotifyMinBrokerIdChangeRequestHeader``):
    ext fields ``minBrokerId``, ``minBrokerAddr``, and ``offlineBrokerAddr`` / ``haBrokerAddr`` only
    when set (null fields are left out of a Java header; RocketMQ does not set ``brokerName``)."""
    ext_fields = {"minBrokerId": str(change.min_broker_id), "minBrokerAddr": change.min_broker_addr}
    if change.offline_broker_addr:
        ext_fields["offlineBrokerAddr"] = change.offline_broker_addr
    if change.ha_broker_addr:
        ext_fields["haBrokerAddr"] = change.ha_broker_addr
    return RemotingCommand(NOTIFY_MIN_BROKER_ID_CHANGE, opaque, FLAG_ONEWAY, None, ext_fields, language="JAVA")


def _host_port(addr: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port); raises ValueError."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not host:port: {addr!r}")
    return host.strip("[]"), int(port)


class BrokerNotifier:
    """Delivers :class:`MinBrokerIdChange` messages (callable with one; thread-safe, never blocks,
    never raises). :meth:`attach` it to the server's event loop before use; :meth:`close` on stop.

    ``registry`` gets the counter ``namesrv_broker_notifications_total{result}``
    (:data:`NOTIFICATION_RESULTS`). ``timeout_seconds`` bounds connect and write each;
    ``max_in_flight`` the sends (and so connections) open at once.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        timeout_seconds: float = SEND_TIMEOUT_SECONDS,
        max_in_flight: int = MAX_IN_FLIGHT,
        log_interval_seconds: float = LOG_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.max_in_flight = max_in_flight
        self.log_interval_seconds = log_interval_seconds
        self._monotonic = monotonic
        self.notifications = Counter(
            "namesrv_broker_notifications",
            "NOTIFY_MIN_BROKER_ID_CHANGE messages to brokers by result: sent, failed (connect or write "
            "failed or timed out), dropped (too many in flight, or stopping); S53",
            ["result"],
            registry=registry,
        )
        for result in NOTIFICATION_RESULTS:
            self.notifications.labels(result)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._opaques = itertools.count()
        self._closed = False
        self._last_log = float("-inf")
        self._unlogged = 0

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send on ``loop`` (call from the loop's thread, e.g. in the server's start)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._closed = False

    @property
    def in_flight(self) -> int:
        """Notifications being sent now."""
        return len(self._tasks)

    def __call__(self, change: MinBrokerIdChange) -> None:
        """Schedule the message to every recipient of ``change``; returns at once, from any thread."""
        loop = self._loop
        if loop is None or self._closed or loop.is_closed():
            self._dropped(change.recipients, "the server is not running")
            return
        if threading.get_ident() == self._loop_thread:
            self._start(change)
        else:
            try:
                loop.call_soon_threadsafe(self._start, change)
            except RuntimeError:  # the loop closed in between
                self._dropped(change.recipients, "the server is stopping")

    def _start(self, change: MinBrokerIdChange) -> None:
        if self._closed or self._loop is None:
            self._dropped(change.recipients, "the server is stopping")
            return
        for addr in change.recipients:
            if len(self._tasks) >= self.max_in_flight:
                self._dropped((addr,), f"{self.max_in_flight} notifications already in flight")
                continue
            frame = encode_command(notify_min_broker_id_change_command(change, next(self._opaques)))
            task = self._loop.create_task(self._send(addr, frame, change), name=f"notify-broker-{addr}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, addr: str, frame: bytes, change: MinBrokerIdChange) -> None:
        try:
            host, port = _host_port(addr)
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.timeout_seconds)
            try:
                writer.write(frame)
                await asyncio.wait_for(writer.drain(), self.timeout_seconds)
            finally:
                writer.close()  # buffered bytes still go out before the FIN
        except (OSError, ValueError, asyncio.TimeoutError) as exc:
            self.notifications.labels("failed").inc()
            reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc) or type(exc).__name__
            self._log(f"cannot tell broker {addr} of {change.broker_name} its smallest broker id: {reason}")
            return
        self.notifications.labels("sent").inc()

    def _dropped(self, addrs: tuple[str, ...], why: str) -> None:
        if not addrs:
            return
        self.notifications.labels("dropped").inc(len(addrs))
        self._log(f"NOTIFY_MIN_BROKER_ID_CHANGE to {', '.join(addrs)} not sent: {why}")

    def _log(self, message: str) -> None:
        now = self._monotonic()
        if now - self._last_log < self.log_interval_seconds:
            self._unlogged += 1
            return
        suffix = f" ({self._unlogged} more such failures not logged)" if self._unlogged else ""
        self._last_log = now
        self._unlogged = 0
        log.warning("%s%s", message, suffix)

    async def drain(self) -> None:
        """Wait until every send started so far has ended (sends take at most twice the timeout)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Stop: messages from now on are dropped; sends in flight are cancelled."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
