"""The route watch hub and the route table's change reports, in process and without sleeping:
coalescing, bounds, deduplication, thread hand-over, and which table changes are reported."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from namesrv_grpc.core.errors import InvalidFieldError, LimitExceededError, TooManyRouteWatchersError
from namesrv_grpc.core.model import DataVersion, QueueData
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.route_watch import RouteWatchHub, watched_topics
from tests.support import FakeClock, topic


class Table:
    """A fake route source: topic -> version string; ``revision`` grows on every change."""

    def __init__(self) -> None:
        self.routes: dict[str, str] = {}
        self.revision = 0
        self.encodes = 0

    def encode(self, topic: str) -> str:
        self.encodes += 1
        return f"{topic}={self.routes.get(topic, 'none')}"

    def change(self, hub: RouteWatchHub[str], **routes: str) -> None:
        self.routes.update(routes)
        self.revision += 1
        hub.routes_changed(self.revision, routes)


def make_hub(table: Table, max_watchers: int = 100, max_topics: int = 10) -> RouteWatchHub[str]:
    return RouteWatchHub(
        table.encode, lambda: table.revision, max_watchers=lambda: max_watchers, max_topics=lambda: max_topics
    )


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_first_take_is_every_topic_once_in_request_order() -> None:
    async def scenario() -> None:
        table = Table()
        table.routes["A"] = "a1"
        hub = make_hub(table)
        watcher = hub.open(["B", "A", "B"])
        assert watcher.topics == ("B", "A")
        assert hub.take(watcher) == (0, [("B", "B=none"), ("A", "A=a1")])
        assert hub.take(watcher) is None

    run(scenario())


def test_changes_coalesce_latest_wins_and_encode_once_for_all_watchers() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        slow = hub.open(["A", "B"])
        others = [hub.open(["A"]) for _ in range(50)]
        for watcher in (slow, *others):
            hub.take(watcher)
        table.encodes = 0
        for version in range(1, 1001):  # 1000 changes while nobody reads
            table.change(hub, A=f"a{version}")
        table.change(hub, B="b1")
        assert len(slow.pending) == 2  # one entry per topic, however many changes
        assert hub.take(slow) == (1001, [("A", "A=a1000"), ("B", "B=b1")])
        for watcher in others:
            assert hub.take(watcher) == (1001, [("A", "A=a1000")])
        assert table.encodes == 2  # A once for 51 watchers, B once

    run(scenario())


def test_a_late_notification_of_a_change_already_sent_is_skipped() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        watcher = hub.open(["A"])
        table.routes["A"] = "a1"
        table.revision = 5  # changed before the first read, reported only afterwards
        assert hub.take(watcher) == (5, [("A", "A=a1")])
        hub.routes_changed(5, ["A"])
        assert hub.take(watcher) is None
        table.change(hub, A="a2")
        assert hub.take(watcher) == (6, [("A", "A=a2")])

    run(scenario())


def test_revisions_of_a_stream_never_go_back() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        watcher = hub.open(["A", "B"])
        table.change(hub, A="a1")
        assert hub.take(watcher) is not None
        assert watcher.revision == 1
        hub.routes_changed(0, None)  # every topic "changed" at an old revision: re-sent, never older
        taken = hub.take(watcher)
        assert taken is not None
        assert taken[0] >= 1

    run(scenario())


def test_every_topic_changed_marks_all_watchers() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        first, second = hub.open(["A"]), hub.open(["B", "C"])
        hub.take(first), hub.take(second)
        table.revision += 1
        hub.routes_changed(table.revision, None)
        assert [t for t, _ in hub.take(first)[1]] == ["A"]  # type: ignore[index]
        assert [t for t, _ in hub.take(second)[1]] == ["B", "C"]  # type: ignore[index]

    run(scenario())


def test_bounds_and_bad_topics_keep_nothing() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table, max_watchers=2, max_topics=3)
        with pytest.raises(InvalidFieldError, match="must list at least one topic"):
            hub.open([])
        with pytest.raises(InvalidFieldError, match="lists 4 topics; at most 3") as too_many:
            hub.open(["A", "A", "A", "A"])  # counted before deduplication: the check is bounded too
        assert too_many.value.field == "topics"
        with pytest.raises(InvalidFieldError) as bad:
            hub.open(["A", "bad\x00name"])
        assert bad.value.field == "topics[1]"
        assert hub.watchers == 0
        assert hub.watched_topics == 0
        hub.open(["A"]), hub.open(["B"])
        with pytest.raises(TooManyRouteWatchersError, match="routeWatchMaxWatchers=2"):
            hub.open(["C"])
        assert hub.watchers == 2
        assert hub.watched_topics == 2

    run(scenario())


def test_close_forgets_everything() -> None:
    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        watchers = [hub.open(["A", "B"]) for _ in range(3)]
        for watcher in watchers:
            hub.take(watcher)
        table.change(hub, A="a1")
        for watcher in watchers:
            hub.close(watcher)
            hub.close(watcher)  # twice is harmless
        assert hub.watchers == 0
        assert hub.watched_topics == 0
        assert not hub._encoded  # no cached route outlives its last watcher
        table.change(hub, A="a2")  # nobody to tell
        assert all(not w.pending for w in watchers)

    run(scenario())


def test_close_all_ends_waiting_streams() -> None:
    async def scenario() -> None:
        hub = make_hub(Table())
        watcher = hub.open(["A"])
        assert await hub.next(watcher) is not None
        waiting = asyncio.create_task(hub.next(watcher))
        await asyncio.sleep(0)  # let it block on the event
        hub.close_all()
        assert await waiting is None

    run(scenario())


@given(st.lists(st.sampled_from(["A", "B", "C", "D"]), min_size=1, max_size=40), st.integers(0, 39))
def test_a_reader_always_ends_with_the_latest_routes(changes: list[str], read_every: int) -> None:
    """Whatever the interleaving of changes and reads, after a final read the watcher has seen every
    topic's latest route, and never more entries than topics per message."""

    async def scenario() -> None:
        table = Table()
        hub = make_hub(table)
        watcher = hub.open(["A", "B", "C", "D"])
        seen: dict[str, str] = {}
        for index, name in enumerate(changes):
            table.change(hub, **{name: f"{name}{index}"})
            if read_every and index % read_every == 0:
                taken = hub.take(watcher)
                if taken is not None:
                    assert len(taken[1]) <= 4
                    seen.update(taken[1])
        taken = hub.take(watcher)
        if taken is not None:
            seen.update(taken[1])
        assert seen == {t: table.encode(t) for t in "ABCD"}

    run(scenario())


def test_watched_topics_dedupes_in_order() -> None:
    assert watched_topics(["b", "a", "b", "c"], 10) == ("b", "a", "c")


# ---------------------------------------------------------------------- the route table's reports


class Reports:
    def __init__(self, table: RouteInfoManager) -> None:
        self.table = table
        self.calls: list[tuple[int, frozenset[str] | None]] = []
        self.complete: list[bool] = []
        table.route_listeners.append(self)

    def __call__(self, revision: int, topics: frozenset[str] | None) -> None:
        self.calls.append((revision, topics))
        self.complete.append(self.table._change_depth == 0)  # told once the outermost change ended

    def last(self) -> set[str] | None:
        topics = self.calls[-1][1]
        return None if topics is None else set(topics)


def registered() -> tuple[RouteInfoManager, Reports, FakeClock]:
    clock = FakeClock()
    table = RouteInfoManager(clock)
    reports = Reports(table)
    table.register_broker(
        cluster_name="c", broker_name="a", broker_id=0, broker_addr="10.0.0.1:10911",
        topic_configs={"T1": topic("T1"), "T2": topic("T2")}, heartbeat_timeout_millis=1000,
    )  # fmt: skip
    table.register_broker(
        cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.2:10911",
        topic_configs={"T2": topic("T2"), "T3": topic("T3")}, heartbeat_timeout_millis=60_000,
    )  # fmt: skip
    return table, reports, clock


def test_route_table_reports_each_change_once_when_it_is_complete() -> None:
    table, reports, clock = registered()
    assert reports.calls == [(1, frozenset({"T1", "T2"})), (2, frozenset({"T2", "T3"}))]
    assert table.route_revision == 2

    # The same registration again changes no route: no report, no new revision.
    table.register_broker(
        cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.2:10911",
        topic_configs={"T2": topic("T2"), "T3": topic("T3")}, heartbeat_timeout_millis=60_000,
    )  # fmt: skip
    assert table.route_revision == 2
    assert len(reports.calls) == 2

    table.register_broker(  # a slave joins: its broker name's BrokerData changes
        cluster_name="c", broker_name="b", broker_id=1, broker_addr="10.0.0.3:10911", heartbeat_timeout_millis=60_000
    )
    assert reports.last() == {"T2", "T3"}
    table.register_broker(  # a master with a new DataVersion and one more queue on T3
        cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.2:10911",
        data_version=DataVersion(0, 2, 2), topic_configs={"T2": topic("T2"), "T3": topic("T3", read=8)},
        heartbeat_timeout_millis=60_000,
    )  # fmt: skip
    assert reports.last() == {"T3"}  # only the QueueData of T3 changed
    table.unregister_broker(cluster_name="c", broker_name="b", broker_id=1, broker_addr="10.0.0.3:10911")
    assert reports.last() == {"T2", "T3"}
    assert table.wipe_write_perm_of_broker("a") == 2
    assert reports.last() == {"T1", "T2"}
    assert table.add_write_perm_of_broker("a") == 2
    assert reports.last() == {"T1", "T2"}
    table.delete_topic("T3")
    assert reports.last() == {"T3"}
    table.register_topic("T9", [QueueData("a", 1, 1, 6, 0)])
    assert reports.last() == {"T9"}
    table.invalidate_routes(["T1"])
    assert reports.last() == {"T1"}
    table.invalidate_routes()
    assert reports.last() is None
    clock.advance(2_000)
    assert [b.broker_name for b in table.scan_not_active_broker()] == ["a"]
    assert reports.last() == {"T1", "T2", "T9"}
    session = table.bind_session(
        cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.2:10911", instance_id=""
    )
    assert session is not None
    assert table.remove_if_session("10.0.0.2:10911", session[0], "session ended") is not None
    assert reports.last() == {"T2"}
    revisions = [revision for revision, _ in reports.calls]
    assert revisions == list(range(1, len(revisions) + 1))
    assert all(reports.complete)


def test_a_refused_registration_reports_nothing() -> None:
    table, reports, _ = registered()
    from namesrv_grpc.core.errors import StaleBrokerStateError

    table.register_broker(
        cluster_name="c", broker_name="a", broker_id=0, broker_addr="10.0.0.1:10911",
        data_version=DataVersion(5, 1, 1), topic_configs={"T1": topic("T1"), "T2": topic("T2")},
    )  # fmt: skip
    count = len(reports.calls)
    with pytest.raises(StaleBrokerStateError):
        table.register_broker(
            cluster_name="c", broker_name="a", broker_id=0, broker_addr="10.0.0.9:10911",
            data_version=DataVersion(1, 1, 1),
        )  # fmt: skip
    assert len(reports.calls) == count


def test_routes_of_reads_many_topics_with_their_revision() -> None:
    table, _, _ = registered()
    revision, routes = table.routes_of(["T1", "nope"])
    assert revision == 2
    assert routes["nope"] is None
    assert routes["T1"] is not None
    assert [q.broker_name for q in routes["T1"].queue_datas] == ["a"]


# --------------------------------------------------------------------------- issue 30: pairs, unread watchers


def bounded_hub(table: Table, per_peer: int, total: int, unread_seconds: float = 60.0) -> RouteWatchHub[str]:
    return RouteWatchHub(
        table.encode,
        lambda: table.revision,
        max_watchers=lambda: 100,
        max_topics=lambda: 10,
        max_topics_per_peer=lambda: per_peer,
        max_topics_total=lambda: total,
        max_unread_seconds=lambda: unread_seconds,
    )


def test_watcher_topic_pairs_are_bounded_per_peer_and_in_total() -> None:
    async def scenario() -> None:
        hub = bounded_hub(Table(), per_peer=5, total=8)
        refused: list[str] = []
        hub.refused = refused.append
        first = hub.open(["A", "B", "C"], peer="10.0.0.1")
        hub.open(["A", "B"], peer="10.0.0.1")
        with pytest.raises(LimitExceededError, match="routeWatchMaxTopicsPerPeer") as per_peer:
            hub.open(["D"], peer="10.0.0.1")
        assert per_peer.value.limit == "routeWatchMaxTopicsPerPeer"
        hub.open(["A", "B", "C"], peer="10.0.0.2")
        with pytest.raises(LimitExceededError, match="routeWatchMaxTopicsTotal"):
            hub.open(["D"], peer="10.0.0.3")
        assert refused == ["watch_topics_per_peer", "watch_topics"]
        assert (hub.watched_pairs, hub.pairs_of("10.0.0.1"), hub.pairs_of("10.0.0.3")) == (8, 5, 0)
        hub.close(first)
        assert (hub.watched_pairs, hub.pairs_of("10.0.0.1")) == (5, 2)
        hub.open(["D", "E", "F"], peer="10.0.0.3")  # room again

    run(scenario())


def test_a_watch_past_a_bound_is_refused_before_its_topic_names_are_checked() -> None:
    """A flood of watches past the per-address bound costs no name checks (checking 1,000 names of
    each of 2,000 refused watches kept a serving process busy, issue 30 row 12l); names are checked
    once the bounds let the watch in, and a bad name then keeps nothing."""

    async def scenario() -> None:
        hub = bounded_hub(Table(), per_peer=3, total=100)
        hub.open(["A", "B", "C"], peer="10.0.0.1")
        with pytest.raises(LimitExceededError, match="routeWatchMaxTopicsPerPeer"):
            hub.open(["D", " bad "], peer="10.0.0.1")
        with pytest.raises(InvalidFieldError, match=r"topics\[1\]"):
            hub.open(["D", " bad "], peer="10.0.0.2")
        assert (hub.watched_pairs, hub.pairs_of("10.0.0.2")) == (3, 0)

    run(scenario())


class _UnreadTopics(Sequence[str]):
    """A request's repeated ``topics`` field whose entries must not be read (only counted)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries

    def __len__(self) -> int:
        return self.entries

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("an entry was read")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the entries were read")


def test_a_watch_of_a_client_at_its_bound_is_refused_without_reading_its_topics() -> None:
    """A client whose open watches already hold routeWatchMaxTopicsPerPeer (or all clients'
    routeWatchMaxTopicsTotal) pairs gets its next watches refused before their topics are read:
    reading 1,000 entries of a protobuf repeated field cost ~0.1 ms per refused watch (issue 30,
    row 12l: 1,000 refused watches took one serving process 0.7 s, now 0.4 s). A watch that is
    too long or empty is refused first, also unread."""

    async def scenario() -> None:
        table = Table()
        hub = RouteWatchHub(
            table.encode,
            lambda: table.revision,
            max_watchers=lambda: 100,
            max_topics=lambda: 1_000,
            max_topics_per_peer=lambda: 3,
            max_topics_total=lambda: 5,
            max_unread_seconds=lambda: 60.0,
        )
        hub.open(["A", "B", "C"], peer="10.0.0.1")
        with pytest.raises(LimitExceededError, match="routeWatchMaxTopicsPerPeer"):
            hub.open(_UnreadTopics(1_000), peer="10.0.0.1")
        hub.open(["A", "B"], peer="10.0.0.2")
        with pytest.raises(LimitExceededError, match="routeWatchMaxTopicsTotal"):
            hub.open(_UnreadTopics(1_000), peer="10.0.0.3")
        with pytest.raises(InvalidFieldError, match="must list at least one topic"):
            hub.open(_UnreadTopics(0), peer="10.0.0.3")
        with pytest.raises(InvalidFieldError, match=r"at most 1000 per request \(routeWatchMaxTopics\)"):
            hub.open(_UnreadTopics(1_001), peer="10.0.0.3")
        assert (hub.watched_pairs, hub.pairs_of("10.0.0.3")) == (5, 0)

    run(scenario())


def test_an_unsent_watcher_costs_nothing_per_change_and_gets_every_route_when_it_reads_again() -> None:
    """A watcher whose message waits for its client is taken off its topics at the first change
    (2,000 such watchers of 1,000 topics made each registration mark 2 million entries); when the
    client reads, it gets the current route of every topic it watches."""

    async def scenario() -> None:
        table = Table()
        hub = bounded_hub(table, per_peer=100, total=100)
        stuck, reader = hub.open(["A", "B"], peer="p"), hub.open(["A"], peer="q")
        hub.take(stuck), hub.take(reader)
        hub.sending(stuck)  # its message is not read
        table.change(hub, A="a1")
        assert stuck.detached
        assert not stuck.pending
        assert hub.watched_topics == 1  # only the reader's A: B's only watcher is off it
        for version in range(2, 100):
            table.change(hub, A=f"a{version}", B=f"b{version}")
        assert not stuck.pending  # nothing marked while off its topics
        assert hub.take(reader) == (99, [("A", "A=a99")])
        hub.sent(stuck)  # the client read it
        assert not stuck.detached
        assert stuck.wake.is_set()
        assert hub.take(stuck) == (99, [("A", "A=a99"), ("B", "B=b99")])
        table.change(hub, B="b100")
        assert hub.take(stuck) == (100, [("B", "B=b100")])

    run(scenario())


def test_a_watcher_left_unsent_too_long_is_dropped_and_its_pairs_freed() -> None:
    async def scenario() -> None:
        hub = bounded_hub(Table(), per_peer=100, total=100, unread_seconds=0.01)
        refused: list[str] = []
        hub.refused = refused.append
        dropped = asyncio.Event()
        stuck = hub.open(["A", "B"], peer="p", on_unread=lambda watcher: dropped.set())
        reader = hub.open(["A"], peer="q", on_unread=lambda watcher: pytest.fail("a reader is never dropped"))
        hub.take(stuck), hub.take(reader)
        hub.sending(stuck)
        hub.sending(reader)
        hub.sent(reader)  # read at once
        await asyncio.wait_for(dropped.wait(), 5)
        assert stuck.dropped
        assert refused == ["watch_unread"]
        assert (hub.watchers, hub.watched_pairs, hub.pairs_of("p")) == (1, 1, 0)
        assert await hub.next(stuck) is None  # its stream ends

    run(scenario())
