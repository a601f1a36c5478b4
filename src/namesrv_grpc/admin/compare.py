"""``namesrv-admin -n "ns1:9876;ns2:9876;ns3:8081" compare``: do all NameServers tell clients the same
thing? The check to run before and after every step of a migration, and in a loop during it.

From each NameServer (Java or ours, remoting or gRPC: :mod:`namesrv_grpc.admin.readers`) it reads the
cluster info, the topic list, the route of every topic any of them lists, and the KV namespaces
named (``--kv-namespace``, default ``ORDER_TOPIC_CONFIG``; RocketMQ's protocol cannot list
namespaces). Reads run at once on every NameServer, at most ``--concurrency`` in flight per
NameServer; on a terminal a progress bar (tqdm, on stderr) counts the routes. One NameServer is a
valid baseline: it is read the same way, and what it holds is printed.

What is compared (each a *fact* with one value per NameServer, absent included: :class:`Difference`):

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

The report is by broker, by topic and by KV key, not by fact (:func:`summarize_differences`): a
broker name absent from some NameServers is one line with the number of topics it serves, and the
route differences its absence explains are folded into it; topics with the same difference share a
line. ``--verbose`` prints the facts under each line; ``--json`` prints both.

Differences only in flight (a broker that registered a second ago with one NameServer and not yet
with the next) are re-checked once: after ``--recheck-after`` seconds the facts that differed are
read again from every NameServer, and only those that still differ are reported.

Exit codes, as ``diff``'s: 0 all agree (or one NameServer was read), 1 they differ, 2 they could not
be compared (bad arguments, or a NameServer that could not be read: named on stderr); and 3, a
warning, when every NameServer was read and none has a broker (nothing was compared). The last line
of the text report is a Prometheus sample (``namesrv_compare_differences{namesrvs="...",
result="agree"} 0``: the number of lines of differences; ``result`` ``agree``, ``differ``,
``unreadable`` with ``NaN``, or ``empty``) for a cron job's textfile collector; ``--json`` prints one
JSON object instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from namesrv_grpc.admin.readers import Endpoint, NamesrvReader, ReadError, WrongPortError, open_reader
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import PERM_INHERIT, PERM_READ, PERM_WRITE, ClusterInfo, QueueData, TopicRouteData

__all__ = ["DEFAULT_KV_NAMESPACES", "Difference", "Snapshot", "add_compare_parser", "differences", "run_compare"]

DEFAULT_KV_NAMESPACES: Final = ("ORDER_TOPIC_CONFIG",)
"""``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``: the namespace compared when none is named."""
DEFAULT_CONCURRENCY: Final = 32
MAX_CONCURRENCY: Final = 1024
DEFAULT_RECHECK_SECONDS: Final = 2.0

EXIT_SAME, EXIT_DIFFERENT, EXIT_TROUBLE, EXIT_EMPTY = 0, 1, 2, 3


def add_compare_parser(sub: Any) -> None:
    """The ``compare`` sub-command and its options."""
    parser = sub.add_parser(
        "compare",
        help="compare what every NameServer of -n tells clients (exit 0 same, 1 different, 2 could not compare, "
        "3 no broker anywhere)",
        description="Read the cluster info, topic list, every topic's route and the named KV namespaces from "
        "each NameServer of -n (Java or namesrv-grpc; remoting or gRPC) and print what differs, one line per "
        "broker, topic and KV key (--verbose: every field). Differences are re-checked once before being "
        "reported. One NameServer is a baseline: it is read and what it holds is printed. Exit codes as diff's: "
        "0 all agree, 1 they differ, 2 they could not be compared; 3 no NameServer has any broker (a warning).",
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
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="under each line of differences, every field that differs with its value on each NameServer",
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


Fact = tuple[str, str, str]
"""(kind, subject, broker name or ""), e.g. ``("perm", "topic TopicTest on broker-a", "broker-a")``."""

QUEUE_KINDS: Final = ("queues", "perm", "topicSysFlag")
"""Facts of one QueueData (a topic on a broker name)."""
BROKER_KINDS: Final = ("broker", "cluster", "brokerData")
"""Facts of the cluster info (a broker name)."""


def cluster_facts(info: ClusterInfo) -> dict[Fact, str]:
    """``broker``, ``cluster`` and ``brokerData`` facts of one cluster info."""
    facts: dict[Fact, str] = {}
    for cluster, names in info.cluster_addr_table.items():
        for name in names:
            facts["cluster", f"{cluster} holds broker name {name}", name] = "yes"
            broker_data = info.broker_addr_table.get(name)
            if broker_data is None:
                continue
            for broker_id, addr in broker_data.broker_addrs.items():
                facts["broker", f"{cluster}/{name} id {broker_id}", name] = addr
            acting = "true" if broker_data.enable_acting_master else "false"
            facts["brokerData", f"{cluster}/{name}", name] = (
                f"zoneName {broker_data.zone_name or '-'}, enableActingMaster {acting}"
            )
    return facts


def queue_values(queue: QueueData) -> dict[str, str]:
    """The ``queues``, ``perm`` and ``topicSysFlag`` values of one QueueData, as compared."""
    return {
        "queues": f"read {queue.read_queue_nums}, write {queue.write_queue_nums}",
        "perm": perm_text(queue.perm),
        "topicSysFlag": str(queue.topic_sys_flag),
    }


def route_facts(topic: str, route: RouteSummary | None) -> dict[Fact, str]:
    """``queues``, ``perm``, ``topicSysFlag`` and ``orderTopicConf`` facts of one topic's route."""
    facts: dict[Fact, str] = {}
    if route is None:
        return facts
    queue_datas, order_topic_conf = route
    for queue in queue_datas:
        where = f"topic {topic} on {queue.broker_name}"
        for kind, value in queue_values(queue).items():
            facts[kind, where, queue.broker_name] = value
    if order_topic_conf:
        facts["orderTopicConf", f"topic {topic}", ""] = order_topic_conf
    return facts


def snapshot_facts(snapshot: Snapshot, topics: Iterable[str], namespaces: Iterable[str]) -> dict[Fact, str]:
    """Every fact of one snapshot, for ``topics`` and ``namespaces``."""
    facts = cluster_facts(snapshot.cluster_info)
    for topic in topics:
        if topic in snapshot.topics:
            facts["topic", f"topic {topic}", ""] = "listed"
        facts.update(route_facts(topic, snapshot.routes.get(topic)))
    for namespace in namespaces:
        for key, value in snapshot.kv.get(namespace, {}).items():
            facts["kv", f"{namespace} {key}", ""] = value
    return facts


@dataclass(frozen=True)
class Difference:
    """One fact the NameServers disagree on: ``values`` by address, None where it is absent;
    ``broker``: the broker name it is about (``broker``, ``cluster``, ``brokerData`` and the queue
    kinds), else ""."""

    kind: str
    subject: str
    values: dict[str, str | None]
    broker: str = ""

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
            by_address = {s.address: v for s, v in zip(snapshots, values, strict=True)}
            found.append(Difference(key[0], key[1], by_address, key[2]))
    return found


# ------------------------------------------------------------------------------------------ summary

TOPICS_NAMED: Final = 3
"""How many topics a line about several topics names before "and N more"."""


@dataclass(frozen=True)
class Finding:
    """One line of the report, standing for one or more :class:`Difference` (``details``):

    - ``broker``: a broker name absent from some NameServers (``absent on ns3 (16 topics)``: the
      route differences its absence explains are folded into it), or whose addresses, cluster or
      ``brokerData`` differ;
    - ``topic``: a topic, or several with the same difference (``subject`` ``N topics``, ``topics``
      names them): what differs in its listing, its QueueData on each broker name, its orderTopicConf;
    - ``kv``: one KV key;
    - any other kind: one difference no line above covers (kept, never dropped).
    """

    kind: str
    subject: str
    text: str
    details: tuple[Difference, ...] = ()
    topics: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "text": self.text,
            "topics": list(self.topics),
            "differences": len(self.details),
        }


def values_text(values: Mapping[str, str | None], absent: str = "absent") -> str:
    """``6 (RW-) on a, b vs 4 (R--) on c``: the NameServers grouped by value, in their order."""
    groups: dict[str | None, list[str]] = {}
    for address, value in values.items():
        groups.setdefault(value, []).append(address)
    return " vs ".join(f"{absent if v is None else v} on {', '.join(a)}" for v, a in groups.items())


def _agree_where_present(values: Mapping[str, Any], absent: Iterable[str]) -> bool:
    """True when ``values`` is None exactly on the ``absent`` NameServers and the same elsewhere."""
    gone = set(absent)
    if any((v is None) != (a in gone) for a, v in values.items()):
        return False
    return len({v for v in values.values() if v is not None}) <= 1


def _topics_line(topics: Sequence[str], description: str) -> str:
    if len(topics) == 1:
        return f"topic {topics[0]}: {description}"
    named = ", ".join(topics[:TOPICS_NAMED])
    more = f" and {len(topics) - TOPICS_NAMED} more" if len(topics) > TOPICS_NAMED else ""
    return f"topics {named}{more}: {description}"


def _route_state(listed: bool, routed: bool) -> str:
    if listed and routed:
        return "present"
    if not listed and not routed:
        return "absent"
    return "listed without a route" if listed else "routed but not listed"


def summarize_differences(snapshots: Sequence[Snapshot], found: Sequence[Difference]) -> list[Finding]:
    """The report's lines for the differences ``found`` among ``snapshots``: by broker, by topic
    (topics with the same difference share a line), by KV key; sorted in that order. A broker name
    with no address on some NameServers is one line, with the number of topics it serves, and the
    topic differences its absence explains (its QueueData missing there; a topic only it serves
    missing there) are its details, not lines of their own."""
    addresses = [s.address for s in snapshots]
    present = {
        s.address: {name for name, data in s.cluster_info.broker_addr_table.items() if data.broker_addrs}
        for s in snapshots
    }
    every_broker = sorted(set().union(*present.values()))
    absent_on = {n: [a for a in addresses if n not in present[a]] for n in every_broker}
    absent_on = {n: where for n, where in absent_on.items() if where}

    # ---- topics: what differs beyond what absent brokers explain
    descriptions: dict[str, str] = {}
    mentioned: dict[str, set[str]] = {}
    brokers_of: dict[str, set[str]] = {}
    for topic in sorted({t for d in found if (t := d.topic()) is not None}):
        description, mentioned[topic], brokers_of[topic] = _topic_description(topic, snapshots, absent_on)
        if description:
            descriptions[topic] = description

    # ---- the lines, then each difference to the line that stands for it
    broker_lines = _broker_lines(found, snapshots, absent_on)
    topic_groups: dict[str, list[str]] = {}
    for topic, description in descriptions.items():
        topic_groups.setdefault(description, []).append(topic)
    topic_lines: dict[str, Finding] = {}
    for description, topics in topic_groups.items():
        subject = topics[0] if len(topics) == 1 else f"{len(topics)} topics"
        finding = Finding("topic", subject, _topics_line(topics, description), topics=tuple(topics))
        topic_lines.update(dict.fromkeys(topics, finding))
    kv_lines: dict[str, Finding] = {}
    others: list[Finding] = []
    owned: dict[int, list[Difference]] = {}

    def owner(diff: Difference) -> Finding | None:
        topic = diff.topic()
        if diff.kind in BROKER_KINDS:
            return broker_lines.get(diff.broker)
        if diff.kind == "kv":
            return kv_lines.setdefault(
                diff.subject, Finding("kv", diff.subject, f"kv {diff.subject}: {values_text(diff.values)}")
            )
        if topic is None:
            return None
        if diff.kind in QUEUE_KINDS:
            if topic in topic_lines and diff.broker in mentioned[topic]:
                return topic_lines[topic]
            return broker_lines.get(diff.broker) or topic_lines.get(topic)
        if topic in topic_lines:
            return topic_lines[topic]
        return next((broker_lines[b] for b in sorted(brokers_of.get(topic, ())) if b in absent_on), None)

    for diff in found:
        line = owner(diff)
        if line is None:
            line = Finding(diff.kind, diff.subject, f"{diff.kind} {diff.subject}: {values_text(diff.values)}")
            others.append(line)
        owned.setdefault(id(line), []).append(diff)
    lines = [
        *broker_lines.values(),
        *dict.fromkeys(topic_lines[t] for t in sorted(topic_lines, key=lambda t: topic_lines[t].topics)),
        *(kv_lines[k] for k in sorted(kv_lines)),
        *others,
    ]
    return [replace(line, details=tuple(owned.get(id(line), ()))) for line in lines]


def _topic_description(
    topic: str, snapshots: Sequence[Snapshot], absent_on: Mapping[str, list[str]]
) -> tuple[str, set[str], set[str]]:
    """What differs about ``topic`` beyond what the broker names ``absent_on`` explain ("" if nothing),
    the broker names whose QueueData that names, and every broker name of its routes."""
    routes = {s.address: s.routes.get(topic) for s in snapshots}
    queues = {a: {q.broker_name: q for q in r[0]} if r else {} for a, r in routes.items()}
    brokers = set().union(*(q.keys() for q in queues.values()))
    states = {s.address: _route_state(topic in s.topics, routes[s.address] is not None) for s in snapshots}
    explained = {  # absent there because every broker name serving it is absent there
        a for a, st in states.items() if st == "absent" and brokers and all(a in absent_on.get(b, ()) for b in brokers)
    }
    considered = {a: st for a, st in states.items() if a not in explained}
    segments: list[str] = []
    if len(set(considered.values())) > 1:
        segments += [f"{st} on {', '.join(a for a in considered if considered[a] == st)}"
                     for st in dict.fromkeys(considered.values()) if st != "present"]  # fmt: skip
    routed = [a for a in considered if routes[a] is not None]
    named: set[str] = set()
    for broker in sorted(brokers):
        values = {a: queues[a].get(broker) for a in routed}
        values = {a: q for a, q in values.items() if not (q is None and a in absent_on.get(broker, ()))}
        if len(set(values.values())) <= 1:
            continue
        named.add(broker)
        missing = [a for a, q in values.items() if q is None]
        if missing:
            segments.append(f"{broker} not in the route on {', '.join(missing)}")
        have = {a: queue_values(q) for a, q in values.items() if q is not None}
        for kind in QUEUE_KINDS:
            by_kind: dict[str, str | None] = {a: v[kind] for a, v in have.items()}
            if len(set(by_kind.values())) > 1:
                segments.append(f"{broker}'s {kind} {values_text(by_kind)}")
    orders: dict[str, str | None] = {a: cast(RouteSummary, routes[a])[1] or None for a in routed}
    if len(set(orders.values())) > 1:
        segments.append(f"orderTopicConf {values_text(orders, absent='(none)')}")
    return "; ".join(segments), named, brokers


def _broker_lines(
    found: Sequence[Difference], snapshots: Sequence[Snapshot], absent_on: Mapping[str, list[str]]
) -> dict[str, Finding]:
    """Broker name -> its line, for each broker name with ``broker``, ``cluster`` or ``brokerData``
    differences; one absent on some NameServers (``absent_on``) says how many topics it serves."""
    serves: dict[str, set[str]] = {n: set() for n in absent_on}
    for snapshot in snapshots:
        for topic, route in snapshot.routes.items():
            for queue in route[0] if route else ():
                if queue.broker_name in serves:
                    serves[queue.broker_name].add(topic)
    broker_lines: dict[str, Finding] = {}
    broker_facts: dict[str, list[Difference]] = {}
    for diff in found:
        if diff.kind in BROKER_KINDS:
            broker_facts.setdefault(diff.broker, []).append(diff)
    for name in sorted(broker_facts):  # an absent broker name always has facts that differ
        cluster, addrs = _broker_identity(name, snapshots)
        facts = broker_facts.get(name, [])
        head = f"broker {cluster}/{name}"
        if name in absent_on:
            count = len(serves[name])
            head += f" ({addrs}) absent on {', '.join(absent_on[name])} ({count} topic{'s' * (count != 1)})"
            facts = [d for d in facts if not _agree_where_present(d.values, absent_on[name])]
        parts = [_broker_fact_text(d, cluster, name) for d in facts]
        text = (head + ("; " if name in absent_on else ": ") + "; ".join(parts)) if parts else head
        broker_lines[name] = Finding("broker", f"{cluster}/{name}", text)
    return broker_lines


def _broker_identity(name: str, snapshots: Sequence[Snapshot]) -> tuple[str, str]:
    """The cluster of broker name ``name`` and its addresses (``h:p, h:p`` by id), from the first
    NameServer that has them."""
    cluster, addrs = "", ""
    for snapshot in snapshots:
        data = snapshot.cluster_info.broker_addr_table.get(name)
        if data is not None and data.broker_addrs:
            return data.cluster, ", ".join(data.broker_addrs[i] for i in sorted(data.broker_addrs))
        holders = (c for c, names in snapshot.cluster_info.cluster_addr_table.items() if name in names)
        cluster = cluster or next(holders, "")
    return cluster, addrs


def _broker_fact_text(diff: Difference, cluster: str, name: str) -> str:
    """One ``broker``/``cluster``/``brokerData`` difference of a broker line."""
    own = f"{cluster}/{name}"
    if diff.kind == "cluster":
        holder = diff.subject.split(" holds broker name ", 1)[0]
        flags = {a: f"in cluster {holder}" if v else f"not in cluster {holder}" for a, v in diff.values.items()}
        return values_text(cast(dict[str, str | None], flags))
    label = diff.subject[len(own) :].strip() if diff.subject.startswith(own) else diff.subject
    return f"{label}: {values_text(diff.values)}" if label else values_text(diff.values)


# ------------------------------------------------------------------------------------------ reading


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled

    def start(self, total: int) -> None:
        if self._enabled:
            from tqdm import tqdm  # on a terminal only: its import costs every other call ~40 ms

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
    """The outcome: differences left after the re-check (``found``, field by field; ``findings``,
    the report's lines), and what was compared."""

    snapshots: list[Snapshot]
    topics: list[str]
    namespaces: list[str]
    found: list[Difference]
    resolved_on_recheck: int
    unreadable: dict[str, str]
    seconds: float
    findings: list[Finding] = field(default_factory=list)
    wrong_ports: set[str] = field(default_factory=set)
    """Addresses of ``unreadable`` that are not NameServer ports (their message says what they are)."""

    @property
    def brokers(self) -> set[str]:
        """Every broker name with an address, on any NameServer."""
        return {
            name for s in self.snapshots for name, data in s.cluster_info.broker_addr_table.items() if data.broker_addrs
        }

    @property
    def broker_addresses(self) -> set[tuple[str, str, int]]:
        """Every ``(cluster, broker name, id)`` with an address, on any NameServer."""
        return {
            (c, n, i)
            for s in self.snapshots
            for c, names in s.cluster_info.cluster_addr_table.items()
            for n in names
            for i in (s.cluster_info.broker_addr_table[n].broker_addrs if n in s.cluster_info.broker_addr_table else {})
        }

    @property
    def kv_entries(self) -> int:
        """Keys of the compared KV namespaces, on any NameServer (a key counted once)."""
        return len({(ns, key) for s in self.snapshots for ns, table in s.kv.items() for key in table})

    @property
    def result(self) -> str:
        """``agree``, ``differ``, ``unreadable``, or ``empty``: they agree, but no NameServer has
        any broker (nothing was compared: a wrong ``-n``, or no broker registered yet)."""
        if self.unreadable:
            return "unreadable"
        if self.findings:
            return "differ"
        return "agree" if self.brokers else "empty"

    @property
    def exit_code(self) -> int:
        return {"agree": EXIT_SAME, "differ": EXIT_DIFFERENT, "unreadable": EXIT_TROUBLE, "empty": EXIT_EMPTY}[
            self.result
        ]


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
    wrong_ports: set[str] = set()

    def cannot_read(name: str, error: ReadError) -> None:
        unreadable[name] = error.message
        if isinstance(error, WrongPortError):
            wrong_ports.add(name)

    opened = await asyncio.gather(*(open_reader(e, security, timeout) for e in endpoints), return_exceptions=True)
    readers: list[NamesrvReader] = []
    for endpoint, snapshot, reader in zip(endpoints, snapshots, opened, strict=True):
        if isinstance(reader, ReadError):
            cannot_read(str(endpoint), reader)
        elif isinstance(reader, BaseException):
            raise reader
        else:
            readers.append(reader)
            snapshot.protocol = reader.protocol

    def result(
        found: list[Difference], resolved: int, topics: list[str], final: list[Snapshot] = snapshots
    ) -> CompareResult:
        return CompareResult(
            final, topics, namespaces, found, resolved, unreadable, time.monotonic() - started,
            summarize_differences(final, found) if found else [], wrong_ports,
        )  # fmt: skip

    try:
        if unreadable:
            return result([], 0, [])
        try:
            await _read_all(
                readers, snapshots, cluster=True, topic_list=True, topics=None, namespaces=namespaces,
                concurrency=concurrency, progress=_Progress(progress),
            )  # fmt: skip
        except ReadError as exc:
            cannot_read(_name_of(exc.address, endpoints), exc)
            return result([], 0, [])
        topics = sorted(set().union(*(s.topics for s in snapshots), *(s.routes for s in snapshots)))
        found = differences(snapshots, topics, namespaces)
        if not found:
            return result([], 0, topics)
        # Re-check once what differed: a broker may have registered with one NameServer a moment ago.
        if before_recheck is not None:
            await before_recheck(found)
        await asyncio.sleep(recheck_after)
        try:
            again = await _read_again(readers, snapshots, found, concurrency)
        except ReadError as exc:
            cannot_read(_name_of(exc.address, endpoints), exc)
            return result([], 0, topics)
        still = differences(again, topics, namespaces)
        before = summarize_differences(snapshots, found)
        after = {(d.kind, d.subject) for d in still}
        resolved = sum(1 for line in before if not any((d.kind, d.subject) in after for d in line.details))
        return result(still, resolved, topics, again)
    finally:
        await asyncio.gather(*(r.close() for r in readers), return_exceptions=True)


async def _read_again(
    readers: list[NamesrvReader], snapshots: list[Snapshot], found: list[Difference], concurrency: int
) -> list[Snapshot]:
    """Copies of ``snapshots`` with what ``found`` says differs read again: the routes of its topics,
    its KV namespaces, the cluster info and topic list if they differ. Raises ReadError."""
    again = [replace(s, routes=dict(s.routes), kv=dict(s.kv)) for s in snapshots]
    kinds = {d.kind for d in found}
    await _read_all(
        readers, again, cluster=bool(kinds & set(BROKER_KINDS)), topic_list="topic" in kinds,
        topics=sorted({t for d in found if (t := d.topic()) is not None}),
        namespaces=sorted({d.subject.split(" ", 1)[0] for d in found if d.kind == "kv"}),
        concurrency=concurrency, progress=_Progress(False),
    )  # fmt: skip
    return again


def _name_of(address: str, endpoints: list[Endpoint]) -> str:
    return next((str(e) for e in endpoints if e.address == address), address)


# ------------------------------------------------------------------------------------------ output


def prometheus_line(result: CompareResult, endpoints: list[Endpoint]) -> str:
    """``namesrv_compare_differences{namesrvs="a;b",result="differ"} 3``: the number of lines of
    differences (brokers, topics, KV keys), NaN when not compared."""
    namesrvs = ";".join(str(e) for e in endpoints).replace("\\", "\\\\").replace('"', '\\"')
    value = "NaN" if result.result == "unreadable" else str(len(result.findings))
    return f'namesrv_compare_differences{{namesrvs="{namesrvs}",result="{result.result}"}} {value}'


def _plural(count: int, noun: str, nouns: str = "") -> str:
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def verdict_line(result: CompareResult) -> str:
    """The first line: the verdict and what was compared."""
    count = len(result.snapshots)
    if result.result == "unreadable":
        return f"not compared: {len(result.unreadable)} of {count} NameServers could not be read"
    protocols = ", ".join(f"{s.address} ({s.protocol or '?'})" for s in result.snapshots)
    held = (
        f"{_plural(len(result.brokers), 'broker name')}, "
        f"{_plural(len(result.broker_addresses), 'broker address', 'broker addresses')}, "
        f"{_plural(len(result.topics), 'topic')}, {_plural(result.kv_entries, 'KV entry', 'KV entries')} "
        f"in {', '.join(result.namespaces) or '(no namespace)'}"
    )
    took = f"in {result.seconds:.1f} s"
    recheck = (
        f"; {result.resolved_on_recheck} more {'was' if result.resolved_on_recheck == 1 else 'were'} in flight "
        "and agreed on re-check"
        if result.resolved_on_recheck
        else ""
    )
    where = f"{_plural(count, 'NameServer')} [{protocols}]"
    if result.result == "empty":
        return (
            f"WARNING no broker on any NameServer: {where} {'holds' if count == 1 else 'hold'} {held}, {took}: "
            "nothing to compare (no broker registered yet, or -n names the wrong NameServers)"
        )
    if count == 1 and result.result == "agree":
        return f"baseline: {where} holds {held} (one NameServer: nothing to compare it with), {took}"
    verdict = "all agree" if result.result == "agree" else _plural(len(result.findings), "difference")
    return f"{verdict}: {where}, {held}{recheck} {took}"


def render_text(result: CompareResult, endpoints: list[Endpoint], *, verbose: bool = False) -> str:
    """The report: the verdict line, one line per difference (with ``verbose``, each followed by
    the field-level differences it stands for), the Prometheus line."""
    lines = [verdict_line(result)]
    width = max(len(s.address) for s in result.snapshots)
    for finding in result.findings:
        lines.append(finding.text)
        if not verbose:
            continue
        for diff in finding.details:
            lines.append(f"    {diff.kind}: {diff.subject}")
            for address, value in diff.values.items():
                lines.append(f"        {address.ljust(width)}  {'(absent)' if value is None else value}")
    lines.append(prometheus_line(result, endpoints))
    return "\n".join(lines)


def render_json(result: CompareResult) -> str:
    """The result as one JSON object."""
    return json.dumps(
        {
            "result": result.result,
            "namesrvs": [{"address": s.address, "protocol": s.protocol or None} for s in result.snapshots],
            "brokers": len(result.brokers),
            "broker_addresses": len(result.broker_addresses),
            "topics": len(result.topics),
            "kv_namespaces": result.namespaces,
            "kv_entries": result.kv_entries,
            "summary": [f.to_json() for f in result.findings],
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
        if address in result.wrong_ports:  # the message names the address and what it is
            print(f"namesrv-admin: compare: {message}", file=sys.stderr)
        else:
            print(f"namesrv-admin: compare: {address} could not be read: {message}", file=sys.stderr)
    if result.result == "empty":
        print("namesrv-admin: compare: warning: no broker on any NameServer: nothing compared", file=sys.stderr)
    print(render_json(result) if args.json else render_text(result, endpoints, verbose=args.verbose))
    return result.exit_code
