"""What one large REGISTER_BROKER costs in the route-table process, in process (no server, no sockets):
decoding the Java broker's body (``decode_java_register_body``) and applying it to the route table
(``RouteInfoManager.register_broker``), for the bodies of bench row J1c (``java_peer.fleet_requests``).

    python -m bench.register_cost [--brokers 100] [--topics 10000] [--compressed]

Phases, in the order they run on one route table:

- ``first``: ``fleet-000``'s first registration (every topic new);
- ``join``: ``fleet-001`` ... each registering the same topics (one more QueueData in every topic);
- ``rereg``: every broker again, broker k with variant ``1 + k % 8`` (1 % of its topics changed and
  a new DataVersion), decoded in full as the route-table process does when the topics changed.

Prints one JSON object: per phase the number of registrations measured and the median milliseconds
of ``decode``, ``apply`` and ``total`` (their sum per registration), as wall-clock time and as this
thread's CPU time (``*_cpu_ms``: what other processes on a busy machine do not inflate). ``--compressed`` sends the
same tables in the compressed (4.9.4+) format instead of plain JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import zlib
from typing import Any

from bench.java_peer import fleet_requests
from namesrv_grpc.core.body import DEFAULT_MAX_INFLATED_BODY_BYTES, DEFAULT_MAX_TOPICS
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.wire.bodies import decode_register_broker_body, encode_register_broker_body
from namesrv_grpc.wire.remoting_register_body import decode_java_register_body

VARIANTS = 8
"""Re-registration variants, as J1 sends them (broker k sends variant ``1 + k % 8``)."""


def _compressed(body: bytes) -> bytes:
    decoded = decode_register_broker_body(body, compressed=False)
    return encode_register_broker_body(decoded.topic_config_table, decoded.data_version, compressed=True)


def measure(brokers: int, topics: int, compressed: bool = False) -> dict[str, Any]:
    """Run the three phases on a fresh route table; per phase the median ms of decode, apply, total."""
    fleet = fleet_requests(brokers, topics)
    variants = {k: fleet_requests(brokers, topics, k) for k in range(1, VARIANTS + 1)}
    bodies: dict[int, bytes] = {0: fleet[0][1]} | {k: requests[0][1] for k, requests in variants.items()}
    if compressed:
        bodies = {k: _compressed(body) for k, body in bodies.items()}
    table = RouteInfoManager()
    phases: dict[str, list[tuple[float, float, float, float]]] = {"first": [], "join": [], "rereg": []}

    def register(phase: str, header: dict[str, str], body: bytes) -> None:
        fingerprint = (zlib.crc32(body), len(body), compressed)  # the serving process's work
        start, start_cpu = time.perf_counter(), time.thread_time()
        decoded = decode_java_register_body(body, compressed, DEFAULT_MAX_INFLATED_BODY_BYTES, DEFAULT_MAX_TOPICS, None)
        decoded_at, decoded_cpu = time.perf_counter(), time.thread_time()
        table.register_broker(
            cluster_name=header["clusterName"],
            broker_name=header["brokerName"],
            broker_id=int(header["brokerId"]),
            broker_addr=header["brokerAddr"],
            ha_server_addr=header["haServerAddr"],
            data_version=decoded.data_version,
            topic_configs=decoded.topic_configs,
            filter_server_list=decoded.filter_server_list,
            heartbeat_timeout_millis=int(header["heartbeatTimeoutMillis"]),
            enable_acting_master=False,
            body_fingerprint=fingerprint,
            topics_fingerprint=decoded.topics_fingerprint,
            protocol="remoting",
        )
        end, end_cpu = time.perf_counter(), time.thread_time()
        phases[phase].append((decoded_at - start, end - decoded_at, decoded_cpu - start_cpu, end_cpu - decoded_cpu))

    for b, (header, _) in enumerate(fleet):
        register("first" if b == 0 else "join", header, bodies[0])
    for b, (header, _) in enumerate(fleet):
        register("rereg", header, bodies[1 + b % VARIANTS])

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 2)

    return {
        "brokers": brokers,
        "topics": topics,
        "compressed": compressed,
        "body_bytes": len(bodies[0]),
        "phases": {
            phase: {
                "registrations": len(times),
                "decode_ms": ms([t[0] for t in times]),
                "apply_ms": ms([t[1] for t in times]),
                "total_ms": ms([t[0] + t[1] for t in times]),
                "decode_cpu_ms": ms([t[2] for t in times]),
                "apply_cpu_ms": ms([t[3] for t in times]),
                "total_cpu_ms": ms([t[2] + t[3] for t in times]),
            }
            for phase, times in phases.items()
            if times
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=100, help="broker names (default 100, as J1)")
    parser.add_argument("--topics", type=int, default=10_000, help="topics per broker (default 10,000, as J1)")
    parser.add_argument("--compressed", action="store_true", help="send the compressed (4.9.4+) body format")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.brokers, args.topics, args.compressed), indent=2))


if __name__ == "__main__":
    main()
