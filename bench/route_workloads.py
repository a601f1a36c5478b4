"""The route workloads mxsm/rocketmq-rust publishes for its Rust-vs-Java NameServer comparison
(``rocketmq-namesrv/benches/fixtures/route_workloads.json``, seed 9191, and the trace and topology its
``benches/support/namesrv_harness.rs`` builds from them), rebuilt here so that our figures line up
with the ones that project quotes (scenario 13, ``bench/java_peer.py``).

A workload: ``topics`` topics ``RouteBenchTopic-NNNNNN`` over ``brokers`` broker names
``route-bench-broker-NNNN`` (cluster ``RouteBenchCluster``, addresses 127.0.0.1:30000+i, even brokers
in zone ``zone-a``, odd in ``zone-b``); topic t lives on the ``route_width`` brokers t, t+1, ... (mod
``brokers``), 4 read / 4 write queues, perm 6. ``operations`` requests are sent closed-loop with
``connections`` in flight: ``write_percent`` % re-send a broker's registration (plain JSON body, as a
5.0.0 broker), the rest are GET_ROUTEINFO_BY_TOPIC of a pseudo-random topic; of those,
``standard_json_percent`` % come from a 5.0.0 client asking standard JSON, the others from a 4.9.3
client (fastjson's form), and ``zone_percent`` % carry ``__ZONE_MODE=true``/``__ZONE_NAME=zone-a``.

Two deviations: registrations carry ``heartbeatTimeoutMillis=600000`` instead of 120000, so that no
broker expires during a long run on a loaded machine (the timeout costs nothing per request); and the
warm-up (as long as theirs: the operations clamped to 100..1,000, per worker process) sends lookups
only, on the connections of the timed run, so that no broker is re-registered over a connection that
then closes (both NameServers drop a broker whose registration connection closes).
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass
from typing import Any

from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.remoting.codec import RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.wire.bodies import encode_register_broker_body

SEED = 9191
"""The fixture's seed."""

VERSION_5_0_0 = 413
"""``MQVersion.Version.V5_0_0.ordinal()`` (checked against the 5.5.0 jars)."""
VERSION_4_9_3 = 399
"""``MQVersion.Version.V4_9_3.ordinal()``: before 4.9.4, so fastjson's form unless standard JSON is asked."""

HEARTBEAT_TIMEOUT_MILLIS = 600_000
_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class Workload:
    """One profile of the fixture (its field names, in snake case)."""

    name: str
    topics: int
    brokers: int
    route_width: int
    connections: int
    operations: int
    write_percent: int
    zone_percent: int
    standard_json_percent: int
    distinct_layouts: bool = False
    """Ours, not the fixture's: each topic of a broker gets queue numbers and perm no other topic of
    it has (:func:`queue_nums`), so no two topics share a route answer's content (issue 41)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled(self, name: str, divisor: int, connections: int, operations: int) -> Workload:
        """A smaller copy (quick and tiny bench profiles): topics and brokers divided, capped connections."""
        brokers = max(self.route_width, self.brokers // divisor)
        return Workload(
            name, max(brokers, self.topics // divisor), brokers, self.route_width, min(self.connections, connections),
            operations, self.write_percent, self.zone_percent, self.standard_json_percent, self.distinct_layouts,
        )  # fmt: skip


WORKLOADS = (
    Workload("smoke", 100, 10, 4, 16, 2_000, 5, 10, 50),
    Workload("topics-20k-width-1", 20_000, 1_000, 1, 64, 100_000, 5, 0, 50),
    Workload("topics-100k-width-4", 100_000, 1_000, 4, 256, 200_000, 5, 10, 50),
    Workload("topics-100k-width-16", 100_000, 1_000, 16, 1_024, 200_000, 5, 10, 50),
)
"""The four profiles of ``route_workloads.json`` (schemaVersion 1), as published."""

DISTINCT_LAYOUTS = Workload("distinct-layouts-100k", 100_000, 200, 1, 256, 200_000, 5, 10, 50, distinct_layouts=True)
"""Ours (issue 41): 100,000 topics, 500 on each of 200 broker names, no two with the same QueueData
(:func:`queue_nums`): every lookup's answer is its own, so the trace is mostly first lookups."""

PERMS = (6, 4, 2)


def queue_nums(w: Workload, topic: int) -> tuple[int, int, int]:
    """``(readQueueNums, writeQueueNums, perm)`` of ``topic``: 4, 4, 6 as in the fixture; with
    ``distinct_layouts``, a different triple for each of a broker's first 768 topics (the k-th topic
    of its broker: read 1 + k % 16, write 1 + k / 16 % 16, perm 6, 4 or 2 by k / 256)."""
    if not w.distinct_layouts:
        return 4, 4, 6
    k = topic // w.brokers
    return 1 + k % 16, 1 + k // 16 % 16, PERMS[k // 256 % 3]


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _slot(index: int, seed: int, percent: int) -> bool:
    return (index + seed) % 100 < percent


def trace(w: Workload, seed: int = SEED) -> list[tuple[bool, int, int, bool, bool]]:
    """The request trace: ``(write, topic index, broker index, zone, standard JSON)`` per operation,
    from the fixture's xorshift generator and percentage slots."""
    state = max(seed, 1)
    out = []
    zone_seed, json_seed = _rotl(seed, 11), _rotl(seed, 29)
    for index in range(w.operations):
        state ^= (state << 13) & _MASK
        state ^= state >> 7
        state ^= (state << 17) & _MASK
        topic = state % w.topics
        state = _rotl(state, 19) ^ 0x9E3779B97F4A7C15
        broker = state % w.brokers
        out.append(
            (_slot(index, seed, w.write_percent), topic, broker, _slot(index, zone_seed, w.zone_percent),
             _slot(index, json_seed, w.standard_json_percent))
        )  # fmt: skip
    return out


def topic_name(index: int) -> str:
    return f"RouteBenchTopic-{index:06d}"


def broker_topics(w: Workload) -> list[list[int]]:
    """The topic indexes of each broker: topic t on brokers t .. t + route_width - 1 (mod brokers)."""
    table: list[list[int]] = [[] for _ in range(w.brokers)]
    for t in range(w.topics):
        for offset in range(w.route_width):
            table[(t + offset) % w.brokers].append(t)
    return table


def registration(w: Workload, broker: int, topics: list[int]) -> tuple[dict[str, str], bytes]:
    """REGISTER_BROKER header fields and body of broker ``broker`` (a 5.0.0 broker, plain JSON body)."""
    configs = {topic_name(t): TopicConfig(topic_name(t), *queue_nums(w, t)) for t in topics}
    body = encode_register_broker_body(configs, DataVersion(1, 1, 1), compressed=False)
    addr = f"127.0.0.1:{30_000 + broker}"
    header = {
        "brokerName": f"route-bench-broker-{broker:04d}", "brokerAddr": addr, "clusterName": "RouteBenchCluster",
        "haServerAddr": addr, "brokerId": "0", "heartbeatTimeoutMillis": str(HEARTBEAT_TIMEOUT_MILLIS),
        "enableActingMaster": "false", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        "__ZONE_NAME": "zone-a" if broker % 2 == 0 else "zone-b",
    }  # fmt: skip
    return header, body


def route_frame(topic: int, zone: bool, standard_json: bool) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC frame (opaque 0: one request in flight per connection)."""
    ext = {"topic": topic_name(topic), "acceptStandardJsonOnly": "true" if standard_json else "false"}
    if zone:
        ext |= {"__ZONE_MODE": "true", "__ZONE_NAME": "zone-a"}
    version = VERSION_5_0_0 if standard_json else VERSION_4_9_3
    return encode_command(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, 0, None, ext, b"", "JAVA", version))


def frames(w: Workload, entries: list[tuple[bool, int, int, bool, bool]]) -> tuple[list[bytes], list[int]]:
    """The distinct frames of ``entries`` and, per entry, the index of its frame."""
    table = broker_topics(w) if any(e[0] for e in entries) else []
    index: dict[tuple[Any, ...], int] = {}
    out: list[bytes] = []
    order = []
    for write, topic, broker, zone, standard_json in entries:
        key: tuple[Any, ...] = ("w", broker) if write else (topic, zone, standard_json)
        if key not in index:
            index[key] = len(out)
            if write:
                header, body = registration(w, broker, table[broker])
                command = RemotingCommand(RequestCode.REGISTER_BROKER, 0, 0, None, header, body, "JAVA", VERSION_5_0_0)
                out.append(encode_command(command))
            else:
                out.append(route_frame(topic, zone, standard_json))
        order.append(index[key])
    return out, order
