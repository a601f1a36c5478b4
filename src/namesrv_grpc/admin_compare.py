"""``namesrv-admin -n "ns1:9876;ns2:9876;ns3:8081" compare``: do all NameServers tell clients the same
thing? The check to run before and after every step of a migration, and in a loop during it.

From each NameServer (Java or ours, remoting or gRPC: :mod:`namesrv_grpc.admin_readers`) it reads the
cluster info, the topic list, the route of every topic any of them lists, and the KV namespaces
named (``--kv-namespace``, default ``ORDER_TOPIC_CONFIG``; RocketMQ's protocol cannot list
namespaces). Reads run at once on every NameServer, at most ``--concurrency`` in flight per
NameServer; on a terminal a progress bar (tqdm, on stderr) counts the routes.

What is compared (each a *fact* with one value per NameServer, absent included):

- ``broker``: the address of each ``cluster/brokerName id N`` (a broker one has and another lacks,
  or a different address);
- ``cluster``: which broker names each cluster holds (a broker name without addresses included);
- ``brokerData``: a broker name's ``zoneName`` and ``enableActingMaster`` (5.x: zone routing and
  acting masters read them);
- ``topic``: whether the topic list holds the topic;
- ``queues`` (read and write queue numbers), ``perm`` (with RocketMQ's ``PermName.perm2String``) and
  ``topicSysFlag`` of every topic on every broker name (its QueueData);
- ``orderTopicConf`` of every route (set when the NameServer's ``orderMessageEnable`` is on);
- ``kv``: every key of the named KV namespaces.

Differences only in flight (a broker that registered a second ago with one NameServer and not yet
with the next) are re-checked once: after ``--recheck-after`` seconds the facts that differed are
read again from every NameServer, and only those that still differ are reported.

Exit codes, as ``diff``'s: 0 all agree, 1 they differ, 2 they could not be compared (bad arguments,
or a NameServer that could not be read: named on stderr). The last line of the text report is a
Prometheus sample (``namesrv_compare_differences{namesrvs="...",result="agree"} 0``; ``NaN`` when
they could not be compared) for a cron job's textfile collector; ``--json`` prints one JSON object
instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tqdm import tqdm

from namesrv_grpc.admin_readers import Endpoint, NamesrvReader, ReadError, open_reader
from namesrv_grpc.core.model import PERM_INHERIT, PERM_READ, PERM_WRITE, ClusterInfo, QueueData, TopicRouteData
from namesrv_grpc.security.client import ClientSecurity

__all__ = ["DEFAULT_KV_NAMESPACES", "Difference", "Snapshot", "add_compare_parser", "differences", "run_compare"]

DEFAULT_KV_NAMESPACES: Final = ("ORDER_TOPIC_CONFIG",)
"""``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``: the namespace compared when none is named."""
DEFAULT_CONCURRENCY: Final = 32
MAX_CONCURRENCY: Final = 1024
DEFAULT_RECHECK_SECONDS: Final = 2.0

EXIT_SAME, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 2


def add_compare_parser(sub: Any) -> None:
    """The ``compare`` sub-command and its options."""
    parser = sub.add_parser(
        "compare",
        help="compare what every NameServer of -n tells clients (exit 0 same, 1 different, 2 could not compare)",
        description="Read the cluster info, topic list, every topic's route and the named KV namespaces from "
        "each NameServer of -n (Java or namesrv-grpc; remoting or gRPC) and print what differs. Differences "
        "are re-checked once before being reported. Exit codes as diff's: 0 all agree, 1 they differ, "
        "2 they could not be compared.",
    )
    parser.add_argument(
        "--kv-namespace",
        action="append",
        default=None,
        metavar="NAMESPACE",
        help=f"KV namespace to compare (repeatable; default {', '.join(DEFAULT_KV_NAMESPACES)})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"requests in flight per NameServer (default {DEFAULT_CONCURRENCY}, at most {MAX_CONCURRENCY})",
    )
    parser.add_argument(
        "--recheck-after",
        type=float,
        default=DEFAULT_RECHECK_SECONDS,
        metavar="SECONDS",
        help=f"wait before re-reading what differed, once (default {DEFAULT_RECHECK_SECONDS:g})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text report")
    parser.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr (default auto: when stderr is a terminal)",
    )


# ------------------------------------------------------------------------------------------- facts


def perm_text(perm: int) -> str:
    """``6 (RW-)``: the number and RocketMQ's ``PermName.perm2String``."""
    flags = (
        ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + ("X" if perm & PERM_INHERIT else "-")
    )
    return f"{perm} ({flags})"


RouteSummary = tuple[tuple[QueueData, ...], str]
"""What a route tells clients, as compared: its QueueData (sorted) and its orderTopicConf. Small: the
route's BrokerData repeat the cluster info, compared once (``broker`` facts)."""


def summarize(route: TopicRouteData | None) -> RouteSummary | None:
    """The :data:`RouteSummary` of a route (None for no route)."""
    if route is None:
        return None
    return tuple(sorted(route.queue_datas)), route.order_topic_conf


@dataclass
class Snapshot:
    """What one NameServer said."""

    address: str
    protocol: str = ""
    cluster_info: ClusterInfo = field(default_factory=lambda: ClusterInfo({}, {}))
    topics: set[str] = field(default_factory=set)
    routes: dict[str, RouteSummary | None] = field(default_factory=dict)
    """Topic -> what its route tells clients (:func:`summarize`); None when it has no route."""
    kv: dict[str, dict[str, str]] = field(default_factory=dict)


Fact = tuple[str, str]
"""(kind, subject), e.g. ``("perm", "topic TopicTest on broker-a")``."""


def cluster_facts(info: ClusterInfo) -> dict[Fact, str]:
    """``broker``, ``cluster`` and ``brokerData`` facts of one cluster info."""
    facts: dict[Fact, str] = {}
    for cluster, names in info.cluster_addr_table.items():
        for name in names:
            facts["cluster", f"{cluster} holds broker name {name}"] = "yes"
            broker_data = info.broker_addr_table.get(name)
            if broker_data is None:
                continue
            for broker_id, addr in broker_data.broker_addrs.items():
                facts["broker", f"{cluster}/{name} id {broker_id}"] = addr
            acting = "true" if broker_data.enable_acting_master else "false"
            facts["brokerData", f"{cluster}/{name}"] = (
                f"zoneName {broker_data.zone_name or '-'}, enableActingMaster {acting}"
            )
    return facts


def route_facts(topic: str, route: RouteSummary | None) -> dict[Fact, str]:
    """``queues``, ``perm``, ``topicSysFlag`` and ``orderTopicConf`` facts of one topic's route."""
    facts: dict[Fact, str] = {}
    if route is None:
        return facts
    queue_datas, order_topic_conf = route
    for queue in queue_datas:
        where = f"topic {topic} on {queue.broker_name}"
        facts["queues", where] = f"read {queue.read_queue_nums}, write {queue.write_queue_nums}"
        facts["perm", where] = perm_text(queue.perm)
        facts["topicSysFlag", where] = str(queue.topic_sys_flag)
    if order_topic_conf:
        facts["orderTopicConf", f"topic {topic}"] = order_topic_conf
    return facts


def snapshot_facts(snapshot: Snapshot, topics: Iterable[str], namespaces: Iterable[str]) -> dict[Fact, str]:
    """Every fact of one snapshot, for ``topics`` and ``namespaces``."""
    facts = cluster_facts(snapshot.cluster_info)
    for topic in topics:
        if topic in snapshot.topics:
            facts["topic", f"topic {topic}"] = "listed"
        facts.update(route_facts(topic, snapshot.routes.get(topic)))
    for namespace in namespaces:
        for key, value in snapshot.kv.get(namespace, {}).items():
            facts["kv", f"{namespace} {key}"] = value
    return facts


@dataclass(frozen=True)
class Difference:
    """One fact the NameServers disagree on: ``values`` by address, None where it is absent."""

    kind: str
    subject: str
    values: dict[str, str | None]

    def topic(self) -> str | None:
        """The topic this difference is about, if any."""
        if self.subject.startswith("topic "):
            return self.subject[len("topic ") :].split(" on ", 1)[0]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "values": self.values}


def differences(snapshots: Sequence[Snapshot], topics: Iterable[str], namespaces: Iterable[str]) -> list[Difference]:
    """Facts whose values are not the same on every snapshot, sorted by kind and subject. Facts are
    made only for the topics whose listing or route differs somewhere (memory: a few per topic)."""
    first = snapshots[0]
    topics = [
        t
        for t in topics
        if any(s.routes.get(t) != first.routes.get(t) or (t in s.topics) != (t in first.topics) for s in snapshots)
    ]
    namespaces = list(namespaces)
    per_namesrv = [snapshot_facts(s, topics, namespaces) for s in snapshots]
    keys = sorted(set().union(*per_namesrv))
    found: list[Difference] = []
    for key in keys:
        values = [facts.get(key) for facts in per_namesrv]
        if any(v != values[0] for v in values):
            found.append(Difference(key[0], key[1], {s.address: v for s, v in zip(snapshots, values, strict=True)}))
    return found


# ------------------------------------------------------------------------------------------ reading


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled

    def start(self, total: int) -> None:
        if self._enabled:
            self._bar = tqdm(total=total, desc="compare", unit="route", file=sys.stderr, leave=False)

    def step(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


async def _run_bounded(limit: int, calls: Iterable[Callable[[], Awaitable[None]]]) -> None:
    """Run ``calls`` with at most ``limit`` at once: ``limit`` workers take the next call from one
    iterator, so memory stays bounded by ``limit`` however many calls there are."""
    pending = iter(calls)

    async def worker() -> None:
        for call in pending:
            await call()

    await asyncio.gather(*(worker() for _ in range(limit)))


async def _read_all(
    readers: list[NamesrvReader],
    snapshots: list[Snapshot],
    *,
    cluster: bool,
    topic_list: bool,
    topics: list[str] | None,
    namespaces: list[str],
    concurrency: int,
    progress: _Progress,
) -> None:
    """Fill the snapshots (every reader at once; bounded per reader). ``topics`` None = every topic
    listed by any NameServer. Raises ReadError (the first)."""

    async def first_pass(reader: NamesrvReader, snapshot: Snapshot) -> None:
        if cluster:
            snapshot.cluster_info = await reader.cluster_info()
        if topic_list:
            snapshot.topics = set(await reader.topic_list())
        for namespace in namespaces:
            snapshot.kv[namespace] = await reader.kv_list(namespace) or {}

    await asyncio.gather(*(first_pass(r, s) for r, s in zip(readers, snapshots, strict=True)))
    wanted = sorted(set().union(*(s.topics for s in snapshots))) if topics is None else topics
    progress.start(len(wanted) * len(readers))

    async def routes(reader: NamesrvReader, snapshot: Snapshot) -> None:
        def call(topic: str) -> Callable[[], Awaitable[None]]:
            async def read() -> None:
                snapshot.routes[topic] = summarize(await reader.route(topic))
                progress.step()

            return read

        await _run_bounded(concurrency, (call(t) for t in wanted))

    try:
        await asyncio.gather(*(routes(r, s) for r, s in zip(readers, snapshots, strict=True)))
    finally:
        progress.close()


@dataclass
class CompareResult:
    """The outcome: differences left after the re-check, and what was compared."""

    snapshots: list[Snapshot]
    topics: list[str]
    namespaces: list[str]
    found: list[Difference]
    resolved_on_recheck: int
    unreadable: dict[str, str]
    seconds: float

    @property
    def result(self) -> str:
        """``agree``, ``differ`` or ``unreadable``."""
        if self.unreadable:
            return "unreadable"
        return "differ" if self.found else "agree"

    @property
    def exit_code(self) -> int:
        return {"agree": EXIT_SAME, "differ": EXIT_DIFFERENT, "unreadable": EXIT_TROUBLE}[self.result]


async def compare(
    endpoints: list[Endpoint],
    security: ClientSecurity,
    *,
    timeout: float,
    namespaces: list[str],
    concurrency: int = DEFAULT_CONCURRENCY,
    recheck_after: float = DEFAULT_RECHECK_SECONDS,
    progress: bool = False,
    before_recheck: Callable[[list[Difference]], Awaitable[None]] | None = None,
) -> CompareResult:
    """Read every NameServer, find the differences, re-check them once (module docstring).
    ``before_recheck`` is awaited with the first differences before the wait (tests use it to
    finish a registration "in flight")."""
    started = time.monotonic()
    snapshots = [Snapshot(str(e)) for e in endpoints]
    unreadable: dict[str, str] = {}
    opened = await asyncio.gather(*(open_reader(e, security, timeout) for e in endpoints), return_exceptions=True)
    readers: list[NamesrvReader] = []
    for endpoint, reader in zip(endpoints, opened, strict=True):
        if isinstance(reader, ReadError):
            unreadable[str(endpoint)] = reader.message
        elif isinstance(reader, BaseException):
            raise reader
        else:
            readers.append(reader)
    for snapshot, reader in zip(snapshots, opened, strict=True):
        if isinstance(reader, NamesrvReader):
            snapshot.protocol = reader.protocol

    def result(found: list[Difference], resolved: int, topics: list[str]) -> CompareResult:
        return CompareResult(snapshots, topics, namespaces, found, resolved, unreadable, time.monotonic() - started)

    try:
        if unreadable:
            return result([], 0, [])
        try:
            await _read_all(
                readers, snapshots, cluster=True, topic_list=True, topics=None, namespaces=namespaces,
                concurrency=concurrency, progress=_Progress(progress),
            )  # fmt: skip
        except ReadError as exc:
            unreadable[_name_of(exc.address, endpoints)] = exc.message
            return result([], 0, [])
        topics = sorted(set().union(*(s.topics for s in snapshots), *(s.routes for s in snapshots)))
        found = differences(snapshots, topics, namespaces)
        if not found:
            return result([], 0, topics)
        # Re-check once what differed: a broker may have registered with one NameServer a moment ago.
        if before_recheck is not None:
            await before_recheck(found)
        await asyncio.sleep(recheck_after)
        again = [
            Snapshot(s.address, s.protocol, s.cluster_info, s.topics, dict(s.routes), dict(s.kv)) for s in snapshots
        ]
        recheck_topics = sorted({t for d in found if (t := d.topic()) is not None})
        kinds = {d.kind for d in found}
        recheck_namespaces = sorted({d.subject.split(" ", 1)[0] for d in found if d.kind == "kv"})
        try:
            await _read_all(
                readers, again, cluster=bool(kinds & {"broker", "cluster", "brokerData"}), topic_list="topic" in kinds,
                topics=recheck_topics, namespaces=recheck_namespaces, concurrency=concurrency,
                progress=_Progress(False),
            )  # fmt: skip
        except ReadError as exc:
            unreadable[_name_of(exc.address, endpoints)] = exc.message
            return result([], 0, topics)
        still = differences(again, topics, namespaces)
        return result(still, len({(d.kind, d.subject) for d in found} - {(d.kind, d.subject) for d in still}), topics)
    finally:
        await asyncio.gather(*(r.close() for r in readers), return_exceptions=True)


def _name_of(address: str, endpoints: list[Endpoint]) -> str:
    return next((str(e) for e in endpoints if e.address == address), address)


# ------------------------------------------------------------------------------------------ output


def prometheus_line(result: CompareResult, endpoints: list[Endpoint]) -> str:
    """``namesrv_compare_differences{namesrvs="a;b",result="differ"} 3`` (NaN when not compared)."""
    namesrvs = ";".join(str(e) for e in endpoints).replace("\\", "\\\\").replace('"', '\\"')
    value = "NaN" if result.result == "unreadable" else str(len(result.found))
    return f'namesrv_compare_differences{{namesrvs="{namesrvs}",result="{result.result}"}} {value}'


def render_text(result: CompareResult, endpoints: list[Endpoint]) -> str:
    """The report: one block per difference, a summary line, the Prometheus line."""
    lines: list[str] = []
    width = max(len(s.address) for s in result.snapshots)
    for diff in result.found:
        lines.append(f"DIFFERENT {diff.kind}: {diff.subject}")
        for address, value in diff.values.items():
            lines.append(f"    {address.ljust(width)}  {'(absent)' if value is None else value}")
    brokers = {
        (c, n, i)
        for s in result.snapshots
        for c, names in s.cluster_info.cluster_addr_table.items()
        for n in names
        for i in (s.cluster_info.broker_addr_table[n].broker_addrs if n in s.cluster_info.broker_addr_table else {})
    }
    protocols = ", ".join(f"{s.address} ({s.protocol or '?'})" for s in result.snapshots)
    if result.result == "unreadable":
        lines.append(f"not compared: {len(result.unreadable)} of {len(result.snapshots)} NameServers could not be read")
    else:
        verdict = "all agree" if not result.found else f"{len(result.found)} difference{'s' * (len(result.found) != 1)}"
        recheck = (
            f"; {result.resolved_on_recheck} more were in flight and agreed on re-check"
            if (result.resolved_on_recheck)
            else ""
        )
        lines.append(
            f"{verdict}: {len(result.snapshots)} NameServers [{protocols}], {len(brokers)} broker addresses, "
            f"{len(result.topics)} topics, KV namespaces {', '.join(result.namespaces) or '(none)'}{recheck} "
            f"in {result.seconds:.1f} s"
        )
    lines.append(prometheus_line(result, endpoints))
    return "\n".join(lines)


def render_json(result: CompareResult) -> str:
    """The result as one JSON object."""
    return json.dumps(
        {
            "result": result.result,
            "namesrvs": [{"address": s.address, "protocol": s.protocol or None} for s in result.snapshots],
            "topics": len(result.topics),
            "kv_namespaces": result.namespaces,
            "differences": [d.to_json() for d in result.found],
            "resolved_on_recheck": result.resolved_on_recheck,
            "unreadable": result.unreadable,
            "seconds": round(result.seconds, 3),
        },
        indent=2,
        ensure_ascii=False,
    )


def run_compare(args: argparse.Namespace, endpoints: list[Endpoint], security: ClientSecurity) -> int:
    """``namesrv-admin compare``: print the report; return the exit code (module docstring)."""
    namespaces = list(dict.fromkeys(args.kv_namespace or DEFAULT_KV_NAMESPACES))
    show_progress = args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    result = asyncio.run(
        compare(
            endpoints,
            security,
            timeout=args.timeout,
            namespaces=namespaces,
            concurrency=args.concurrency,
            recheck_after=args.recheck_after,
            progress=show_progress,
        )
    )
    for address, message in result.unreadable.items():
        print(f"namesrv-admin: compare: {address} could not be read: {message}", file=sys.stderr)
    print(render_json(result) if args.json else render_text(result, endpoints))
    return result.exit_code
