"""What a topic's *first* lookup costs in a serving process, in process (no server, no sockets):
answers encoded per topic against answers found by content (issue 41), in the same run.

    python -m bench.first_lookups [--topics 20000] [--layouts 1000] [--brokers 16]

The table: ``--brokers`` broker names; ``--topics`` topics, each on 4 of them with one of 4 queue
shapes, drawn from ``--layouts / 4`` sets of broker names (so about ``--layouts`` distinct layouts,
as in rocketmq-rust's 20k/100k profiles). For each form the doors send (gRPC
``PickupTopicRouteResponse``, remoting standard JSON, fastjson's old JSON), every topic is asked for
once in a shuffled order with nothing cached, then once more (warm), two ways:

- ``per_topic``: ``RouteInfoManager.pickup_topic_route_cached`` keyed by topic alone (what every
  lookup paid before issue 41);
- ``by_content``: ``NameServer.topic_route_encoded`` as the doors call it (a topic whose layout was
  answered before gets that answer).

Prints one JSON object: per form and way, microseconds per lookup (first and warm), and the ratio
per_topic / by_content of the first lookups.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig, TopicRouteData
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.grpc_api.encoded_responses import encode_route_response
from namesrv_grpc.remoting.handlers import route_old_json, route_standard_json

SHAPES = [(8, 8, 6, 0), (16, 16, 6, 0), (4, 4, 6, 0), (8, 8, 4, 0)]
"""QueueNums (read, write, perm, sysflag) a topic is created with."""


FORMS: dict[str, Callable[[TopicRouteData], Any]] = {
    "grpc": encode_route_response,
    "standard_json": route_standard_json,
    "old_json": route_old_json,
}


def build(store: Path, topics: int, layouts: int, brokers: int, seed: int = 7) -> tuple[NameServer, list[str]]:
    """A NameServer whose table holds the generated topics (registered as each broker's whole table)."""
    rnd = random.Random(seed)
    names = [f"broker-{i}" for i in range(brokers)]
    name_sets = [sorted(rnd.sample(names, min(4, brokers))) for _ in range(max(1, layouts // len(SHAPES)))]
    per_broker: dict[str, dict[str, TopicConfig]] = {name: {} for name in names}
    for t in range(topics):
        topic, shape = f"Topic-{t}", rnd.choice(SHAPES)
        for name in rnd.choice(name_sets):
            per_broker[name][topic] = TopicConfig(topic, *shape)
    ns = NameServer(NamesrvConfig(config_store_path=str(store)), RouteInfoManager(), KVConfigManager(None))
    for i, name in enumerate(names):
        ns.route_table.register_broker(
            cluster_name="DefaultCluster",
            broker_name=name,
            broker_id=0,
            broker_addr=f"10.0.0.{i}:10911",
            data_version=DataVersion(1, 1, 0),
            topic_configs=per_broker[name],
        )
    return ns, [f"Topic-{t}" for t in range(topics)]


def measure(topics: int, layouts: int, brokers: int) -> dict[str, Any]:
    """Microseconds per first and warm lookup, per form, per topic and by content."""
    result: dict[str, Any] = {"topics": topics, "layouts": layouts, "brokers": brokers}
    with tempfile.TemporaryDirectory() as tmp:
        ns, names = build(Path(tmp) / "namesrv.properties", topics, layouts, brokers)
        result["distinct_layouts"] = len(set(ns.route_table.topic_queue_nums.values()))
        order = random.Random(1)
        for form, encode in FORMS.items():

            def per_topic(topic: str, encode: Callable[[TopicRouteData], Any] = encode) -> Any:
                return ns.route_table.pickup_topic_route_cached(topic, encode)

            def by_content(topic: str, encode: Callable[[TopicRouteData], Any] = encode) -> Any:
                return ns.topic_route_encoded(topic, encode)

            ways: dict[str, Callable[[str], Any]] = {"per_topic": per_topic, "by_content": by_content}
            row: dict[str, float] = {}
            for way, lookup in ways.items():
                ns.route_table.route_answers.clear()
                order.shuffle(names)
                start = time.perf_counter()
                for topic in names:
                    lookup(topic)
                first = time.perf_counter()
                for topic in names:
                    lookup(topic)
                warm = time.perf_counter()
                row[f"{way}_first_us"] = round(1e6 * (first - start) / len(names), 2)
                row[f"{way}_warm_us"] = round(1e6 * (warm - first) / len(names), 2)
            row["first_ratio"] = round(row["per_topic_first_us"] / row["by_content_first_us"], 2)
            result[form] = row
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.first_lookups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20_000, help="topics in the table (default 20000)")
    parser.add_argument("--layouts", type=int, default=1_000, help="about this many distinct layouts (default 1000)")
    parser.add_argument("--brokers", type=int, default=16, help="broker names (default 16)")
    args = parser.parse_args(argv)
    if args.topics < 1 or args.layouts < 1 or args.brokers < 1:
        parser.error("--topics, --layouts and --brokers must be at least 1")
    print(json.dumps(measure(args.topics, args.layouts, args.brokers), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
