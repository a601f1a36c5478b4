"""Prometheus metrics of the broker agent (prometheus-client), served on ``--metrics-port``.

Names follow Prometheus practice: prefix ``broker_agent_``, base units (seconds), counters end in
``_total``. The only label that holds an address is ``namesrv``: the NameServers this agent
registers with (its configured ``namesrvAddr`` entries, or the addresses a configured DNS name
resolves to), a small set. No topic is ever a label value.

- ``broker_agent_registrations_total{namesrv,result}`` (counter): RegisterBroker calls by result (RESULTS)
- ``broker_agent_registration_duration_seconds{namesrv}`` (histogram): time of one RegisterBroker call
- ``broker_agent_last_registration_success_timestamp_seconds{namesrv}`` (gauge): Unix time of the last success
- ``broker_agent_registration_consecutive_failures{namesrv}`` (gauge): failed calls since the last success
- ``broker_agent_session_state{namesrv}`` (gauge): SESSION_STATES (0 = no session)
- ``broker_agent_topics`` (gauge): topics in the registration body
- ``broker_agent_data_version`` (gauge): the ``counter`` of the topics' DataVersion
- ``broker_agent_registration_conflicts_total{namesrv}`` (counter): registrations the NameServer
  answered with another run of this broker that had taken the registration (two agents for one broker)
- ``broker_agent_build_info{version}`` (gauge): always 1
- ``process_*`` and ``python_*``: prometheus-client's standard process and platform series
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import TypeVar

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from namesrv_grpc.metrics import package_version, register_standard_collectors

T = TypeVar("T")

RESULTS = ("ok", "rejected", "unavailable", "timeout", "error")
"""Values of the ``result`` label, all initialised to 0 for every NameServer: ``ok``; ``rejected``
(the NameServer answered with an error status, e.g. INVALID_ARGUMENT or FAILED_PRECONDITION);
``unavailable`` (UNAVAILABLE: not reachable); ``timeout`` (no answer within
``registerBrokerTimeoutMills``); ``error`` (anything else)."""

SESSION_STATES = {"none": 0, "stopped": 0, "unsupported": 0, "connecting": 1, "registering": 2, "open": 3}
"""Values of ``broker_agent_session_state`` by session state. The session code sets the gauge
(``metrics.session_state.labels(namesrv).set(SESSION_STATES[state])``); it is 0 (no session) until
then."""

REGISTRATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Buckets of the registration time: from a loopback call to ``registerBrokerTimeoutMills`` (24 s)."""


def registration_result(error: BaseException | None) -> str:
    """The ``result`` label of a registration that ended with ``error`` (None: success)."""
    if error is None:
        return "ok"
    if isinstance(error, (TimeoutError, asyncio.CancelledError)):  # wait_for cancels at the deadline
        return "timeout"
    if isinstance(error, grpc.aio.AioRpcError):
        code = error.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return "timeout"
        if code == grpc.StatusCode.UNAVAILABLE:
            return "unavailable"
        if code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN):
            return "error"
        return "rejected"
    return "error"


class AgentMetrics:
    """The agent's metrics in their own registry (so several agents can run in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, standard: bool = True) -> None:
        """``standard``: also export the ``process_*`` and ``python_*`` series."""
        self.registry = registry or CollectorRegistry()
        if standard:
            register_standard_collectors(self.registry)
        self.registrations = Counter(
            "broker_agent_registrations",
            "RegisterBroker calls by NameServer and result.",
            ["namesrv", "result"],
            registry=self.registry,
        )
        self.registration_seconds = Histogram(
            "broker_agent_registration_duration_seconds",
            "Time of one RegisterBroker call to one NameServer, until its answer, error or deadline.",
            ["namesrv"],
            buckets=REGISTRATION_BUCKETS,
            registry=self.registry,
        )
        self.last_success = Gauge(
            "broker_agent_last_registration_success_timestamp_seconds",
            "Unix time of the last successful RegisterBroker call to a NameServer.",
            ["namesrv"],
            registry=self.registry,
        )
        self.consecutive_failures = Gauge(
            "broker_agent_registration_consecutive_failures",
            "RegisterBroker calls to a NameServer that failed since its last success (one per round).",
            ["namesrv"],
            registry=self.registry,
        )
        self.session_state = Gauge(
            "broker_agent_session_state",
            "Liveness session with a NameServer: 0 none, 1 connecting, 2 registering, 3 open.",
            ["namesrv"],
            registry=self.registry,
        )
        """Set by the session code (see SESSION_STATES); 0 = no session."""
        self.topics = Gauge(
            "broker_agent_topics",
            "Topics the agent registers (system topics and topics.json).",
            registry=self.registry,
        )
        self.data_version = Gauge(
            "broker_agent_data_version",
            "The counter of the topics' DataVersion (grows with every change of topics.json).",
            registry=self.registry,
        )
        self.registration_conflicts = Counter(
            "broker_agent_registration_conflicts",
            "Registrations answered with another run of this broker (same cluster, name, id) that had taken "
            "the registration from this agent: two agents for one broker.",
            ["namesrv"],
            registry=self.registry,
        )
        Info("broker_agent_build", "Build information.", registry=self.registry).info({"version": package_version()})
        self._namesrvs: set[str] = set()

    def add_namesrv(self, namesrv: str) -> None:
        """Create the series of a NameServer at 0 (done on its first registration)."""
        if namesrv in self._namesrvs:
            return
        self._namesrvs.add(namesrv)
        for result in RESULTS:
            self.registrations.labels(namesrv, result)
        self.registration_seconds.labels(namesrv)
        self.consecutive_failures.labels(namesrv).set(0)
        self.session_state.labels(namesrv).set(0)
        self.registration_conflicts.labels(namesrv)

    def forget_namesrv(self, namesrv: str) -> None:
        """Remove every series of a NameServer the agent no longer registers with (its address
        vanished from DNS), so that no alert fires for it."""
        if namesrv not in self._namesrvs:
            return
        self._namesrvs.discard(namesrv)
        for result in RESULTS:
            with contextlib.suppress(KeyError):  # prometheus-client < 0.21 raises for absent series
                self.registrations.remove(namesrv, result)
        for metric in (
            self.consecutive_failures,
            self.session_state,
            self.registration_seconds,
            self.last_success,
            self.registration_conflicts,
        ):
            with contextlib.suppress(KeyError):
                metric.remove(namesrv)

    def observe_registration(self, namesrv: str, error: BaseException | None, seconds: float) -> None:
        """Record one RegisterBroker call to ``namesrv`` that took ``seconds`` and ended with
        ``error`` (None: success)."""
        self.add_namesrv(namesrv)
        result = registration_result(error)
        self.registrations.labels(namesrv, result).inc()
        self.registration_seconds.labels(namesrv).observe(seconds)
        if result == "ok":
            self.last_success.labels(namesrv).set(time.time())
            self.consecutive_failures.labels(namesrv).set(0)
        else:
            self.consecutive_failures.labels(namesrv).inc()

    async def timed_registration(self, namesrv: str, call: Awaitable[T]) -> T:
        """Await a RegisterBroker call to ``namesrv`` and record its result and duration."""
        started = time.perf_counter()
        try:
            response = await call
        except BaseException as error:
            self.observe_registration(namesrv, error, time.perf_counter() - started)
            raise
        self.observe_registration(namesrv, None, time.perf_counter() - started)
        return response

    def observe_topics(self, topics: int, data_version_counter: int) -> None:
        """Record the topics about to be registered: their number and DataVersion counter."""
        self.topics.set(topics)
        self.data_version.set(data_version_counter)
