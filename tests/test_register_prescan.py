"""A master's topics are compared with the table, and their new records built, before the lock is
taken (``RouteInfoManager._prepare``): under the lock only the records that change are written
(``_commit``), a change of the broker name's QueueData in between makes the registration compare
everything again under the lock, and a record another broker name changed in between is worked out
again (S07 unchanged)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from namesrv_grpc.core import route_table
from namesrv_grpc.core.digest import full_digest
from namesrv_grpc.core.model import PERM_READ, DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.route_table import PreparedTopics, RouteInfoManager
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


def test_s07_only_the_differing_topics_are_written_under_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_s07_the_comparison_runs_without_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    table = RouteInfoManager(FakeClock())
    register(table, topics(100), DataVersion(0, 1, 1))
    acquired: list[bool] = []
    original = table._prepare

    def probing(*args: Any) -> Any:
        other = threading.Thread(target=lambda: acquired.append(_try_lock(table)))
        other.start()
        other.join()
        return original(*args)

    monkeypatch.setattr(table, "_prepare", probing)
    register(table, topics(100, changed=1), DataVersion(0, 2, 2))
    assert acquired == [True], "another thread (a route lookup) can take the lock during the comparison"


def test_s07_a_record_another_broker_name_changed_meanwhile_is_worked_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """broker-b registers the same topics between broker-a's comparison and its lock: both broker
    names' QueueData end up in every topic's route, and the digest is that of the table."""
    table = RouteInfoManager(FakeClock())
    original = table._prepare

    def racing(*args: Any) -> Any:
        found = original(*args)
        monkeypatch.setattr(table, "_prepare", original)  # once: broker-b's own registration prepares too
        table.register_broker(
            cluster_name="c1", broker_name="broker-b", broker_id=0, broker_addr="10.0.0.2:10911",
            data_version=DataVersion(0, 1, 1), topic_configs={t.topic_name: t for t in topics(30)},
        )  # fmt: skip
        return found

    monkeypatch.setattr(table, "_prepare", racing)
    register(table, topics(20, changed=20), DataVersion(0, 1, 1))
    routes = table.topic_queue_table
    assert all(set(routes[f"T{i}"]) == {"broker-a", "broker-b"} for i in range(20))
    assert routes["T5"]["broker-a"] == QueueData("broker-a", 4, 4, 6)
    assert set(routes["T25"]) == {"broker-b"}
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())


def _try_lock(table: RouteInfoManager, timeout: float = 5) -> bool:
    if table._lock.acquire(timeout=timeout):
        table._lock.release()
        return True
    return False


def test_s07_a_change_between_comparison_and_lock_makes_every_topic_compared_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """WipeWritePermOfBroker ends after the comparison found nothing to write but before the
    registration takes the lock: the registration still restores every topic's perm (it comes
    last), as it would have without the early comparison."""
    table = RouteInfoManager(FakeClock())
    register(table, topics(50), DataVersion(0, 1, 1))
    original = table._prepare

    def racing(*args: Any) -> Any:
        found = original(*args)
        assert found.topics == [], "same topics: nothing differs at comparison time"
        assert table.wipe_write_perm_of_broker("broker-a") == 50
        return found

    monkeypatch.setattr(table, "_prepare", racing)
    register(table, topics(50), DataVersion(0, 2, 2))
    assert {qd.perm for qd in queue_datas(table).values()} == {6}, "the wiped perm is written back by S07"

    monkeypatch.setattr(table, "_prepare", original)
    assert table.wipe_write_perm_of_broker("broker-a") == 50
    register(table, topics(50), DataVersion(0, 3, 3))
    assert {qd.perm for qd in queue_datas(table).values()} == {6}
    assert table.wipe_write_perm_of_broker("broker-a") == 50
    assert {qd.perm for qd in queue_datas(table).values()} == {PERM_READ}


def test_s07_a_change_stays_seen_when_the_change_stamps_start_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for 2 broker names' stamps, other brokers' registrations make the stamps start
    over (broker-a's is forgotten) before and after broker-a's wipe: the registration prepared before
    the wipe still sees that broker-a changed, and writes every perm back."""
    monkeypatch.setattr(route_table, "MAX_NAME_STAMPS", 2)
    table = RouteInfoManager(FakeClock())

    def register_others(counter: int) -> None:
        for name in ("broker-b", "broker-c"):
            table.register_broker(
                cluster_name="c1", broker_name=name, broker_id=0, broker_addr=f"10.0.1.{ord(name[-1])}:10911",
                data_version=DataVersion(0, 1, counter), topic_configs={"X": TopicConfig("X", 1, counter, 6)},
            )  # fmt: skip

    register(table, topics(20), DataVersion(0, 1, 1))
    register_others(1)  # broker-a's stamp is forgotten
    original = table._prepare

    def racing(*args: Any) -> Any:
        found = original(*args)
        monkeypatch.setattr(table, "_prepare", original)
        assert table.wipe_write_perm_of_broker("broker-a") == 20
        register_others(2)  # forgotten again
        return found

    monkeypatch.setattr(table, "_prepare", racing)
    register(table, topics(20), DataVersion(0, 2, 2))
    assert {table.topic_queue_table[f"T{i}"]["broker-a"].perm for i in range(20)} == {6}


def test_s07_a_big_first_registration_is_prepared_in_slices_with_the_loop_paced_between() -> None:
    """1,300 topics no broker name holds yet: prepared in three slices of 512 with ``pace`` called
    between them and once more before the lock; every topic gets the broker's QueueData, topics with
    the same numbers share one record, and the digest is that of the table."""
    table = RouteInfoManager(FakeClock())
    paced: list[int] = []
    table.pace = lambda: paced.append(len(table.topic_queue_nums))
    register(table, topics(1_300, changed=300), DataVersion(0, 1, 1))
    assert paced == [0, 0, 0], "paced twice between the three slices and once before the lock, nothing written yet"
    assert len(table.topic_queue_nums) == 1_300
    assert queue_datas(table)["T299"] == QueueData("broker-a", 4, 4, 6)
    assert queue_datas(table)["T300"] == QueueData("broker-a", 8, 8, 6)
    assert len({id(record) for record in table.topic_queue_nums.values()}) == 2, "one record per distinct numbers"
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())


def test_s07_records_another_broker_name_changed_between_slices_are_worked_out_again() -> None:
    """While broker-a's registration is between its first and second slice, broker-b registers T0-T9
    (prepared already as topics nobody holds) and T600 (not prepared yet): the first slice is written
    topic by topic and keeps broker-b's QueueData, the second sees broker-b's records; the digest is
    that of the table."""
    table = RouteInfoManager(FakeClock())
    calls: list[int] = []

    def broker_b_registers() -> None:
        calls.append(1)
        if len(calls) == 1:
            table.register_broker(
                cluster_name="c1", broker_name="broker-b", broker_id=0, broker_addr="10.0.0.2:10911",
                data_version=DataVersion(0, 1, 1),
                topic_configs={t: TopicConfig(t, 2, 2, 6) for t in [*(f"T{i}" for i in range(10)), "T600"]},
            )  # fmt: skip

    table.pace = broker_b_registers
    register(table, topics(1_300), DataVersion(0, 1, 1))
    routes = table.topic_queue_table
    for topic in ("T0", "T9", "T600"):
        assert routes[topic] == {"broker-a": QueueData("broker-a", 8, 8, 6), "broker-b": QueueData("broker-b", 2, 2, 6)}
    assert set(routes["T10"]) == {"broker-a"}
    assert len(routes) == 1_300
    assert table.route_digest() == full_digest(table.topic_queue_table, table.broker_addr_table.values())


def test_s07_the_writes_let_go_of_the_gil_between_slices_under_the_lock() -> None:
    """1,300 changed topics are written in three slices: ``pace_locked`` is called twice, each time
    with the lock held (a reader needing the lock never sees half of the registration), after the
    comparison's pacing."""
    table = RouteInfoManager(FakeClock())
    register(table, topics(1_300), DataVersion(0, 1, 1))
    calls: list[str] = []
    table.pace = lambda: calls.append("pace")

    def pace_locked() -> None:
        calls.append("locked" if not _lock_free_for_another_thread(table) else "unlocked")

    table.pace_locked = pace_locked
    register(table, topics(1_300, changed=1_300), DataVersion(0, 2, 2))
    assert calls == ["pace", "pace", "pace", "locked", "locked"]
    assert {qd.read_queue_nums for qd in queue_datas(table).values()} == {4}


def _lock_free_for_another_thread(table: RouteInfoManager) -> bool:
    got: list[bool] = []
    other = threading.Thread(target=lambda: got.append(_try_lock(table, timeout=0.05)))
    other.start()
    other.join()
    return got[0]
