"""A master's topics are compared with the table in bulk (``RouteInfoManager._prepare``) and only the
records that change are written (``_commit``), topics with the same numbers sharing one record
(S07 unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from namesrv_grpc.core.digest import full_digest
from namesrv_grpc.core.model import DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.topic_table import PreparedTopics
from tests.support import FakeClock

A = "10.0.0.1:10911"


def register(table: RouteInfoManager, topics: list[TopicConfig], version: DataVersion) -> None:
    table.register_broker(
        cluster_name="c1",
        broker_name="broker-a",
        broker_id=0,
        broker_addr=A,
        data_version=version,
        topic_configs={t.topic_name: t for t in topics},
    )


def topics(count: int, *, changed: int = 0) -> list[TopicConfig]:
    """``count`` topics with 8 queues; the first ``changed`` of them with 4."""
    return [TopicConfig(f"T{i}", 4 if i < changed else 8, 4 if i < changed else 8, 6) for i in range(count)]


def queue_datas(table: RouteInfoManager) -> dict[str, QueueData]:
    return {topic: by_name["broker-a"] for topic, by_name in table.topic_queue_table.items()}


def test_s07_only_the_differing_topics_are_written(monkeypatch: pytest.MonkeyPatch) -> None:
    table = RouteInfoManager(FakeClock())
    register(table, topics(1_000), DataVersion(0, 1, 1))
    prepared: list[list[str]] = []
    original = table._prepare

    def recording(*args: Any) -> PreparedTopics:
        found = original(*args)
        prepared.append(list(found.topics))
        return found

    monkeypatch.setattr(table, "_prepare", recording)
    monkeypatch.setattr(table, "_create_and_update_queue_nums", None)  # the slow path is not taken
    register(table, topics(1_000, changed=10), DataVersion(0, 2, 2))
    assert prepared == [[f"T{i}" for i in range(10)]]
    assert queue_datas(table)["T3"] == QueueData("broker-a", 4, 4, 6)
    assert queue_datas(table)["T10"] == QueueData("broker-a", 8, 8, 6)
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())


def test_s07_a_new_brokers_topics_share_one_record_per_distinct_numbers() -> None:
    table = RouteInfoManager(FakeClock())
    register(table, topics(1_000, changed=400), DataVersion(0, 1, 1))
    records = {id(table.topic_queue_nums[f"T{i}"]) for i in range(1_000)}
    assert len(records) == 2
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())


def test_s07_a_second_broker_name_adds_its_queue_data_to_shared_records() -> None:
    table = RouteInfoManager(FakeClock())
    register(table, topics(500), DataVersion(0, 1, 1))
    table.register_broker(
        cluster_name="c1", broker_name="broker-b", broker_id=0, broker_addr="10.0.0.2:10911",
        data_version=DataVersion(0, 1, 1), topic_configs={t.topic_name: t for t in topics(300, changed=300)},
    )  # fmt: skip
    routes = table.topic_queue_table
    assert routes["T5"] == {"broker-a": QueueData("broker-a", 8, 8, 6), "broker-b": QueueData("broker-b", 4, 4, 6)}
    assert set(routes["T400"]) == {"broker-a"}
    assert len({id(table.topic_queue_nums[f"T{i}"]) for i in range(300)}) == 1
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())
