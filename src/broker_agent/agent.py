"""The broker sidecar: registers a broker with every NameServer on RocketMQ's schedule (S30-S36).

One round (RocketMQ ``BrokerController.registerBrokerAll`` + ``BrokerOuterAPI``):

1. Unless forced, ask every NameServer ``QueryDataVersion``; register only when one says changed or
   cannot answer (S31).
2. Encode the body once (optionally zlib-compressed, with its CRC32C) and call ``RegisterBroker``
   on every NameServer at once; wait for all of them up to ``registerBrokerTimeoutMills``. A
   NameServer that fails or is slow is logged and never holds up the others (S32, S33).
3. From the first successful answer (in ``namesrvAddr`` order), a slave learns its master's
   address and HA address, and the ORDER_TOPIC_CONFIG table is kept (S34).

Schedule (S30): a forced round at start, then every ``max(10 s, min(registerNameServerPeriod, 60 s))``
with the first periodic round 10 s after start. Between rounds topics.json is checked once a
second; when its topics change a forced round runs at once (as a broker registers a new topic at
once). SIGHUP also forces a round. Orderly shutdown unregisters from every NameServer (S36) when the
broker is stopping too (nothing accepts connections at its address); when the broker still runs (the
agent alone is restarted or upgraded) it hands its sessions over instead, and the NameServers keep
the broker until its next registration or S13 expiry (``on_stop``).

NameServer addresses may be DNS names (a Kubernetes headless service): every round resolves each
name again and registers with every address behind it, so NameServers added or replaced are picked
up without restarting the broker. With ``sessions`` on, a :class:`~broker_agent.session.SessionKeeper`
keeps a liveness session open to every NameServer (S15).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import grpc

from broker_agent.client import GrpcNamesrvClient, NamesrvClient
from broker_agent.config import BrokerConfig
from broker_agent.metrics import SESSION_STATES, AgentMetrics
from broker_agent.session import SessionKeeper
from broker_agent.topics import BrokerTopics, TopicSource
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import MASTER_ID
from namesrv_grpc.core.validation import parse_host_port
from namesrv_grpc.wire.grpc_register_body import data_version_to_proto, encode_body

log = logging.getLogger(__name__)

FIRST_PERIODIC_ROUND_MILLIS = 10_000
"""The first periodic round runs 10 s after start (S30)."""

TOPICS_POLL_SECONDS = 1.0
"""How often topics.json is checked for changes between rounds."""


def registration_period_millis(register_name_server_period: int) -> int:
    """S30: ``max(10 000, min(registerNameServerPeriod, 60 000))`` ms."""
    return max(10_000, min(register_name_server_period, 60_000))


Resolver = Callable[[str], Awaitable[list[str]]]
"""Host name -> IP addresses."""


async def resolve_host(host: str) -> list[str]:
    """The IPv4 addresses of ``host`` (IPv6 ones when it has no IPv4), sorted; raises OSError.

    IPv4 first, as Java's default: ``localhost`` is one NameServer, not two."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    v4 = sorted({str(info[4][0]) for info in infos if info[0] == socket.AF_INET})
    return v4 or sorted({str(info[4][0]) for info in infos if info[0] == socket.AF_INET6})


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def describe_error(error: BaseException) -> str:
    """A short description of a failed call: the gRPC code and details, or the exception."""
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    if isinstance(error, TimeoutError):
        return "DEADLINE_EXCEEDED: no answer within registerBrokerTimeoutMills"
    return f"{type(error).__name__}: {error}"


@dataclass(slots=True)
class RoundResult:
    """What one round did: answers by NameServer address, errors by address, whether the
    registration was skipped because no NameServer saw a change (S31)."""

    responses: dict[str, ns_pb2.RegisterBrokerResponse] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: bool = False


OnStop = Literal["auto", "unregister", "hand-over"]
ON_STOP_CHOICES: tuple[OnStop, ...] = ("auto", "unregister", "hand-over")
"""What an orderly stop (SIGTERM/SIGINT) does: ``auto`` unregisters (S36) only when the broker is
stopping too (nothing accepts connections at its address) and otherwise hands the sessions over;
``unregister`` always unregisters (RocketMQ's broker does on its own shutdown); ``hand-over`` never
does."""

BROKER_PROBE_SECONDS = 1.0
"""How long the stop waits for the broker's port to accept a connection (``auto``)."""


class BrokerAgent:
    """Keeps one broker registered with every NameServer of ``config.namesrv_addrs``."""

    def __init__(
        self,
        config: BrokerConfig,
        topic_source: TopicSource,
        client_factory: Callable[[str], NamesrvClient] = GrpcNamesrvClient,
        *,
        sessions: bool = False,
        resolver: Resolver = resolve_host,
        metrics: AgentMetrics | None = None,
        on_stop: OnStop = "auto",
    ) -> None:
        """``sessions`` keeps a liveness session open to every NameServer (needs clients with a
        ``channel``, as GrpcNamesrvClient has). ``resolver`` resolves NameServer host names.
        ``metrics`` records every registration (broker_agent.metrics; a registry of its own when None).
        ``on_stop``: what an orderly stop does (:data:`ON_STOP_CHOICES`)."""
        if on_stop not in ON_STOP_CHOICES:
            raise ValueError(f"on_stop must be one of {', '.join(ON_STOP_CHOICES)}, not {on_stop!r}")
        self.on_stop = on_stop
        self.config = config
        self.topic_source = topic_source
        self.metrics = metrics or AgentMetrics()
        self.instance_id = uuid.uuid4().hex
        """Identifies this run of the broker to the NameServers (sessions guard only their own)."""
        self._client_factory = client_factory
        self._resolver = resolver
        self._resolved: dict[str, list[str]] = {}
        self.clients: list[NamesrvClient] = []
        self.sessions_enabled = sessions
        self.keepers: dict[str, SessionKeeper] = {}
        self._keeper_tasks: dict[str, asyncio.Task[None]] = {}
        self.master_addr = ""
        self.ha_master_addr = ""
        self.order_topic_config: dict[str, str] = {}
        self.rounds = 0
        self._wakeup = asyncio.Event()
        self._registered_topics: BrokerTopics | None = None
        self._sync_clients([a for a in config.namesrv_addrs if _is_ip(parse_host_port(a)[0])])

    async def refresh_namesrv_addrs(self) -> list[str]:
        """Resolve every configured NameServer address again; open clients for new addresses and
        close those of vanished ones. A name that fails to resolve keeps its previous addresses."""
        addresses: list[str] = []
        for entry in self.config.namesrv_addrs:
            host, port = parse_host_port(entry)
            if _is_ip(host):
                addresses.append(entry)
                continue
            try:
                ips = await self._resolver(host)
            except OSError as exc:
                log.warning("cannot resolve NameServer %s (%s); keeping %s", entry, exc, self._resolved.get(entry, []))
                ips = None
            if ips is not None:
                resolved = [f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}" for ip in ips]
                if resolved != self._resolved.get(entry):
                    log.info("NameServer %s resolves to %s", entry, ", ".join(resolved) or "nothing")
                self._resolved[entry] = resolved
            addresses.extend(self._resolved.get(entry, []))
        await self._close_clients(self._sync_clients(list(dict.fromkeys(addresses))))
        return [c.address for c in self.clients]

    def host_name_of(self, address: str) -> str | None:
        """The configured NameServer host name that resolved to ``address`` (``ip:port``), or None
        (an address given as an IP). TLS clients expect this name in the server's certificate."""
        for entry, resolved in self._resolved.items():
            if address in resolved:
                return parse_host_port(entry)[0]
        return None

    def _sync_clients(self, addresses: list[str]) -> list[NamesrvClient]:
        """Make ``self.clients`` match ``addresses``; return the clients dropped."""
        current = {c.address: c for c in self.clients}
        self.clients = [current.get(addr) or self._client_factory(addr) for addr in addresses]
        return [c for addr, c in current.items() if addr not in addresses]

    async def _close_clients(self, dropped: list[NamesrvClient]) -> None:
        for client in dropped:
            task = self._keeper_tasks.pop(client.address, None)
            self.keepers.pop(client.address, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await client.close()
            self.metrics.forget_namesrv(client.address)
            log.info("NameServer %s is gone from the address list", client.address)

    def _start_sessions(self) -> None:
        """Start a session keeper for every NameServer that has none."""
        if not self.sessions_enabled:
            return
        hello = ns_pb2.SessionHello(**self._identity(), instance_id=self.instance_id)  # type: ignore[arg-type]
        for client in self.clients:
            channel = getattr(client, "channel", None)
            if client.address in self._keeper_tasks or channel is None:
                continue
            keeper = SessionKeeper(
                client.address, channel, hello, self.register_with, self._master_changed, self._session_state
            )
            self.keepers[client.address] = keeper
            self._keeper_tasks[client.address] = asyncio.create_task(keeper.run(), name=f"session {client.address}")

    async def _stop_sessions(self) -> None:
        tasks = list(self._keeper_tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._keeper_tasks.clear()

    def _session_state(self, address: str, state: str) -> None:
        self.metrics.session_state.labels(address).set(SESSION_STATES[state])

    def _master_changed(self, master_addr: str, ha_server_addr: str) -> None:
        if self.config.broker_id == MASTER_ID:
            return
        if master_addr != self.master_addr:
            log.info("master address of %s is now %r", self.config.broker_name, master_addr)
        self.master_addr = master_addr
        if ha_server_addr:
            self.ha_master_addr = ha_server_addr

    @property
    def timeout_seconds(self) -> float:
        """Per-NameServer deadline of a round, ``registerBrokerTimeoutMills`` in seconds."""
        return self.config.register_broker_timeout_mills / 1000

    def _identity(self) -> dict[str, object]:
        return {
            "cluster_name": self.config.broker_cluster_name,
            "broker_name": self.config.broker_name,
            "broker_id": self.config.broker_id,
            "broker_addr": self.config.broker_addr,
        }

    async def _each(self, call: Callable[[NamesrvClient], object]) -> dict[str, object]:
        """Run ``call`` on every NameServer at once, each bounded by the timeout; return result or
        exception by address."""

        async def bounded(client: NamesrvClient) -> object:
            return await asyncio.wait_for(call(client), self.timeout_seconds)  # type: ignore[arg-type]

        results = await asyncio.gather(*(bounded(c) for c in self.clients), return_exceptions=True)
        return {client.address: result for client, result in zip(self.clients, results, strict=True)}

    async def need_register(self, topics: BrokerTopics) -> bool:
        """S31: True when any NameServer says the DataVersion changed or cannot answer."""
        request = ns_pb2.QueryDataVersionRequest(
            **self._identity(),  # type: ignore[arg-type]
            data_version=data_version_to_proto(topics.data_version),
        )
        results = await self._each(lambda c: c.query_data_version(request, self.timeout_seconds))
        need = False
        for addr, result in results.items():
            if isinstance(result, BaseException):
                log.warning("QueryDataVersion on %s failed (%s): registering", addr, describe_error(result))
                need = True
            elif result.changed:  # type: ignore[attr-defined]
                need = True
        return need

    def _register_request(self, topics: BrokerTopics) -> ns_pb2.RegisterBrokerRequest:
        """S32: the request, with the body encoded once (optionally compressed) and its CRC32C."""
        body, crc = encode_body(
            topics.topic_config_table,
            topics.data_version,
            compress=self.config.compressed_register,
            topic_queue_mappings=topics.topic_queue_mappings,
        )
        return ns_pb2.RegisterBrokerRequest(
            **self._identity(),  # type: ignore[arg-type]
            ha_server_addr=self.config.ha_server_addr,
            body=body,
            body_crc32c=crc,
            compressed=self.config.compressed_register,
            heartbeat_timeout_millis=self.config.heartbeat_timeout_millis,
            enable_acting_master=self.config.enable_slave_acting_master,
            zone_name=self.config.zone_name,
            instance_id=self.instance_id,
        )

    async def register_all(self, *, force: bool) -> RoundResult:
        """One round (S31-S34). ``force`` skips the QueryDataVersion check (forceRegister)."""
        self.rounds += 1
        await self.refresh_namesrv_addrs()
        topics = self.topic_source.current()
        self.metrics.observe_topics(len(topics.topic_config_table), topics.data_version.counter)
        if not force and not await self.need_register(topics):
            log.debug("round %d: no NameServer saw a change; registration skipped", self.rounds)
            self._start_sessions()
            return RoundResult(skipped=True)
        request = self._register_request(topics)
        started = time.perf_counter()
        results = await self._each(
            lambda c: self.metrics.timed_registration(c.address, c.register_broker(request, self.timeout_seconds))
        )
        elapsed_ms = (time.perf_counter() - started) * 1000
        outcome = RoundResult()
        for addr, result in results.items():
            if isinstance(result, BaseException):
                outcome.errors[addr] = describe_error(result)
                log.warning("register with %s failed: %s", addr, outcome.errors[addr])
            else:
                outcome.responses[addr] = result  # type: ignore[assignment]
                self._check_conflict(addr, result)  # type: ignore[arg-type]
        # Sessions start after the round's registration: a session's hello that reached a NameServer
        # before the broker's first registration would make it ask for a second one at once.
        self._start_sessions()
        log.log(
            logging.INFO if outcome.responses else logging.WARNING,
            "round %d: registered %d topics (dataVersion counter %d) with %d/%d NameServers in %.0f ms",
            self.rounds,
            len(topics.topic_config_table),
            topics.data_version.counter,
            len(outcome.responses),
            len(self.clients),
            elapsed_ms,
        )
        if outcome.responses:
            self._registered_topics = topics
            self._apply_first_result(next(iter(outcome.responses.values())))
        return outcome

    async def register_with(self, address: str) -> bool:
        """Register with one NameServer now (a session asked for it); True on success."""
        client = next((c for c in self.clients if c.address == address), None)
        if client is None:
            return False
        request = self._register_request(self.topic_source.current())
        try:
            response = await asyncio.wait_for(
                self.metrics.timed_registration(address, client.register_broker(request, self.timeout_seconds)),
                self.timeout_seconds,
            )
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            log.warning("register with %s failed: %s", address, describe_error(error))
            return False
        log.info("registered with %s (it asked)", address)
        self._check_conflict(address, response)
        self._apply_first_result(response)
        return True

    def _check_conflict(self, address: str, response: ns_pb2.RegisterBrokerResponse) -> None:
        """The NameServer says another run of this broker had taken the registration from this one
        (two agents for one broker): say so loudly and count it."""
        other = response.conflicting_instance_id
        if not other:
            return
        self.metrics.registration_conflicts.labels(address).inc()
        log.warning(
            "another agent (instance %s) registers %s/%s id %d too: NameServer %s had its registration instead of "
            "this one's (instance %s); the two take the broker from each other. Run one agent per broker.",
            other,
            self.config.broker_cluster_name,
            self.config.broker_name,
            self.config.broker_id,
            address,
            self.instance_id,
        )

    def _apply_first_result(self, response: ns_pb2.RegisterBrokerResponse) -> None:
        """S34: a slave follows its master; the ORDER_TOPIC_CONFIG table is kept."""
        self._master_changed(response.master_addr, response.ha_server_addr)
        kv_table = dict(response.kv_table)
        if kv_table != self.order_topic_config:
            log.info("ORDER_TOPIC_CONFIG from NameServer: %s", kv_table)
        self.order_topic_config = kv_table

    async def broker_running(self) -> bool:
        """True when something accepts TCP connections at the broker's address (``brokerIP1``:
        ``listenPort``) within :data:`BROKER_PROBE_SECONDS`: the broker still runs."""
        host, port = parse_host_port(self.config.broker_addr)
        try:
            async with asyncio.timeout(BROKER_PROBE_SECONDS):
                _, writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def hand_over_all(self) -> int:
        """End every open session with ``handover``: the NameServers keep the broker until its next
        registration or S13 expiry. Returns how many were handed over."""
        reason = f"broker-agent {self.instance_id} stops; broker {self.config.broker_addr} still runs"
        results = await asyncio.gather(
            *(keeper.hand_over(reason, self.timeout_seconds) for keeper in self.keepers.values())
        )
        handed = sum(1 for result in results if result)
        log.info(
            "broker %s still runs: sessions handed over to %d/%d NameServers, not unregistered (they keep it "
            "until its next registration or S13 expiry)",
            self.config.broker_addr,
            handed,
            len(self.clients),
        )
        return handed

    async def stop(self) -> None:
        """What an orderly stop does (``on_stop``): unregister from every NameServer (S36), or hand
        the sessions over when the broker still runs (``auto``, the default) or always (``hand-over``)."""
        hand_over = self.on_stop == "hand-over" or (self.on_stop == "auto" and await self.broker_running())
        if hand_over:
            await self.hand_over_all()
        else:
            await self.unregister_all()
        await self._stop_sessions()

    async def unregister_all(self) -> dict[str, str]:
        """S36: unregister from every NameServer at once; return errors by address (logged, not fatal)."""
        request = ns_pb2.UnregisterBrokerRequest(**self._identity(), instance_id=self.instance_id)  # type: ignore[arg-type]
        results = await self._each(lambda c: c.unregister_broker(request, self.timeout_seconds))
        errors = {addr: describe_error(r) for addr, r in results.items() if isinstance(r, BaseException)}
        for addr, error in errors.items():
            log.warning("unregister from %s failed: %s", addr, error)
        log.info("unregistered from %d/%d NameServers", len(results) - len(errors), len(results))
        return errors

    def request_round(self) -> None:
        """Ask the running loop for a forced round now (SIGHUP)."""
        self._wakeup.set()

    async def run(self, stop: asyncio.Event, *, sleep_unit: float = 1.0) -> None:
        """Register at start, then on the schedule (S30) until ``stop`` is set; then :meth:`stop`
        (unregister, S36, or hand the sessions over).

        ``sleep_unit`` scales every wait (1.0 = real seconds); tests pass a small value.
        """
        await self.register_all(force=True)
        period = registration_period_millis(self.config.register_name_server_period) / 1000 * sleep_unit
        loop = asyncio.get_running_loop()
        next_round = loop.time() + FIRST_PERIODIC_ROUND_MILLIS / 1000 * sleep_unit
        while not stop.is_set():
            wait = min(TOPICS_POLL_SECONDS * sleep_unit, max(0.0, next_round - loop.time()))
            await _wait_any(stop, self._wakeup, wait)
            if stop.is_set():
                break
            forced = self._wakeup.is_set()
            self._wakeup.clear()
            if forced or self._topics_changed():
                await self.register_all(force=True)
            elif loop.time() >= next_round:
                await self.register_all(force=self.config.force_register)
                next_round = loop.time() + period
        await self.stop()

    def _topics_changed(self) -> bool:
        if not self.topic_source.changed_on_disk():
            return False
        return self.topic_source.current() != self._registered_topics

    async def close(self) -> None:
        """Stop the sessions and close every NameServer channel."""
        await self._stop_sessions()
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)


async def _wait_any(first: asyncio.Event, second: asyncio.Event, timeout: float) -> None:
    waiters: Sequence[asyncio.Task[bool]] = [
        asyncio.create_task(first.wait()),
        asyncio.create_task(second.wait()),
    ]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
