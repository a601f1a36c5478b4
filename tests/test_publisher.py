"""The route-table process's read-your-writes gate (``processes.route_table_process.Publisher``): a
write's answer runs once every serving process has applied every change published before it; a
serving process that joins gets the table in pieces and holds no answer back until it serves."""

from __future__ import annotations

import asyncio
import functools
import pickle
from typing import Any

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.replication import Change
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes import route_table_process
from namesrv_grpc.processes.route_table_process import Publisher, ServingLink


class _RecordingChannel:
    """A link's channel that keeps what the publisher sends, as the serving process reads it."""

    name = "serving process 9 (pid 1009)"

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, message: tuple[Any, ...]) -> None:
        self.sent.append(pickle.loads(pickle.dumps(message)))

    def send_encoded(self, data: bytes) -> None:
        self.sent.append(pickle.loads(data))


def _publisher(serving_processes: int) -> tuple[Publisher, list[ServingLink]]:
    nameserver = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
    publisher = Publisher(nameserver, lambda: 10.0)
    links = [
        ServingLink(_RecordingChannel(), index, 1000 + index, serving=True)  # type: ignore[arg-type]
        for index in range(serving_processes)
    ]
    for link in links:
        publisher.links[link.channel] = link
    return publisher, links


def _waiting_answers(publisher: Publisher, seqs: range, answered: list[int]) -> None:
    """One answer waiting per change in ``seqs`` (published one after the other)."""
    for seq in seqs:
        publisher.seq = publisher.read_seq = seq
        publisher.after_applied(functools.partial(answered.append, seq))


def test_answers_wait_for_the_slowest_serving_process_and_run_in_publish_order() -> None:
    async def scenario() -> None:
        publisher, (one, two) = _publisher(2)
        answered: list[int] = []
        _waiting_answers(publisher, range(1, 7), answered)
        assert answered == []

        publisher.applied(one, 6)  # the other has applied nothing yet
        assert answered == []
        publisher.applied(two, 3)
        assert answered == [1, 2, 3]
        publisher.applied(two, 5)
        assert answered == [1, 2, 3, 4, 5]
        publisher.applied(two, 6)
        assert answered == [1, 2, 3, 4, 5, 6]

        publisher.seq = 7  # everything published is applied by both: an answer runs at once
        one.applied = two.applied = 7
        publisher.after_applied(lambda: answered.append(7))
        assert answered[-1] == 7

    asyncio.run(scenario())


def test_a_serving_process_that_leaves_no_longer_holds_answers_back() -> None:
    async def scenario() -> None:
        publisher, (one, two) = _publisher(2)
        answered: list[int] = []
        _waiting_answers(publisher, range(1, 4), answered)
        publisher.applied(one, 3)
        assert answered == []
        publisher.leave(two)  # it died: its brokers are handled as on closed connections
        assert answered == [1, 2, 3]

    asyncio.run(scenario())


def test_tens_of_thousands_of_waiting_answers_are_released_in_order() -> None:
    """A connection that closes with thousands of brokers bound to it makes thousands of writes at
    once (one session end each). Releasing them used to rebuild the whole waiting list at every
    acknowledgement (quadratic: a 5.7 s stall of the route-table process after a bench trace); each
    acknowledgement now releases its prefix only. Checked here: all released, in order, none early."""

    async def scenario() -> None:
        publisher, (one, two) = _publisher(2)
        answered: list[int] = []
        count = 20_000
        _waiting_answers(publisher, range(1, count + 1), answered)
        publisher.applied(one, count)
        for seq in range(1, count + 1):
            publisher.applied(two, seq)
            assert len(answered) == seq
        assert answered == list(range(1, count + 1))

    asyncio.run(scenario())


def _register(nameserver: NameServer, broker: str, topics: range, version: int) -> None:
    nameserver.route_table.register_broker(
        cluster_name="c",
        broker_name=broker,
        broker_id=0,
        broker_addr=f"{broker}:10911",
        data_version=DataVersion(1, version),
        topic_configs={f"T{i}": TopicConfig(topic_name=f"T{i}") for i in topics},
    )


def test_a_joining_serving_process_gets_the_table_in_pieces_and_holds_no_answer_back_until_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 39: with 950,000 topics, the state a replaced serving process starts from was made and
    pickled in one event-loop turn, and every write then waited for the new process to apply it
    (501 ms). Now: one piece per turn, the changes published meanwhile held back until the last
    piece, and writes wait for it only once it said ``ready`` and was told what to apply first."""
    monkeypatch.setattr(route_table_process, "REPLICA_PIECE_TOPICS", 2)

    async def scenario() -> None:
        publisher, (one,) = _publisher(1)
        nameserver = publisher.nameserver
        nameserver.track_changes()
        _register(nameserver, "broker-a", range(5), 1)
        publisher.publish()
        one.applied = publisher.seq
        channel = _RecordingChannel()
        joining = ServingLink(channel, 9, 1009)  # type: ignore[arg-type]
        publisher.join(joining)
        assert [m[0] for m in channel.sent] == ["state"]  # one piece now, the others in later turns

        _register(nameserver, "broker-b", range(3, 8), 2)  # a write while the pieces go out
        publisher.publish()
        answered: list[str] = []
        publisher.after_applied(lambda: answered.append("during the join"))
        assert answered == []  # it waits for the serving process that serves...
        publisher.applied(one, publisher.seq)
        assert answered == ["during the join"]  # ...not for the one that joins

        for _ in range(20):
            await asyncio.sleep(0)
        kinds = [m[0] for m in channel.sent]
        assert kinds == ["state"] * (len(kinds) - 1) + ["change"], kinds  # the held change after the last piece
        assert [m[2] for m in channel.sent[:-1]] == [False] * (len(kinds) - 2) + [True]
        assert len(kinds) > 3

        replica = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
        for message in channel.sent:
            change: Change = message[1]
            replica.apply_change(change)
        assert replica.route_table.topic_queue_nums == nameserver.route_table.topic_queue_nums
        assert replica.route_table.broker_addr_table == nameserver.route_table.broker_addr_table

        publisher.ready(joining)
        assert channel.sent[-1] == ("serve", publisher.seq)
        _register(nameserver, "broker-c", range(8, 9), 3)  # once it serves, writes wait for it too
        publisher.publish()
        publisher.after_applied(lambda: answered.append("after ready"))
        publisher.applied(one, publisher.seq)
        assert answered == ["during the join"]
        publisher.applied(joining, publisher.seq)
        assert answered == ["during the join", "after ready"]

    asyncio.run(scenario())


def test_ready_before_the_last_piece_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route_table_process, "REPLICA_PIECE_TOPICS", 1)

    async def scenario() -> None:
        publisher, _ = _publisher(0)
        _register(publisher.nameserver, "broker-a", range(3), 1)
        joining = ServingLink(_RecordingChannel(), 9, 1009)  # type: ignore[arg-type]
        publisher.join(joining)
        with pytest.raises(ConnectionError, match="said ready before the last piece"):
            publisher.ready(joining)

    asyncio.run(scenario())


def test_an_answer_does_not_wait_for_a_change_no_read_sees() -> None:
    """A broker's new body with the same topics (a new DataVersion) changes only which body the
    replicas know it registered (``registered_bodies``): published, but the write's answer runs at
    once; a change a read sees after it waits for both serving processes again."""

    async def scenario() -> None:
        publisher, (one, two) = _publisher(2)
        table = publisher.nameserver.route_table
        table.track_changes()
        topics = {"T": TopicConfig("T", 4, 4)}

        def register(counter: int) -> None:
            table.register_broker(
                cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:1",
                data_version=DataVersion(0, 1, counter), topic_configs=topics if counter == 1 else None,
                body_fingerprint=(counter, 10, False), topics_fingerprint=5,
            )  # fmt: skip

        answered: list[str] = []
        register(1)
        assert publisher.publish()
        publisher.after_applied(functools.partial(answered.append, "first"))
        assert answered == []
        for link in (one, two):
            publisher.applied(link, publisher.seq)
        assert answered == ["first"]
        register(2)  # the same topics (fingerprint 5), a new body
        assert publisher.publish()
        change = one.channel.sent[-1][1]  # type: ignore[attr-defined]
        assert not change.seen_by_reads()
        assert set(change.table.registered_bodies) == {"10.0.0.1:1"}
        publisher.after_applied(functools.partial(answered.append, "same topics"))
        assert answered == ["first", "same topics"]
        publisher.nameserver.delete_topic("T", "")
        assert publisher.publish()
        publisher.after_applied(functools.partial(answered.append, "deleted"))
        assert answered == ["first", "same topics"]
        for link in (one, two):
            publisher.applied(link, publisher.seq)
        assert answered == ["first", "same topics", "deleted"]

    asyncio.run(scenario())
