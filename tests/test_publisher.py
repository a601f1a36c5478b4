"""The route-table process's read-your-writes gate (``processes.route_table_process.Publisher``): a
write's answer runs once every serving process has applied every change published before it."""

from __future__ import annotations

import asyncio
import functools

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.route_table_process import Publisher, ServingLink


class _Channel:
    """Stands in for a link's channel: the publisher only uses it as a key here (nothing is sent)."""


def _publisher(serving_processes: int) -> tuple[Publisher, list[ServingLink]]:
    nameserver = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
    publisher = Publisher(nameserver, lambda: 10.0)
    links = [ServingLink(_Channel(), index, 1000 + index) for index in range(serving_processes)]  # type: ignore[arg-type]
    for link in links:
        publisher.links[link.channel] = link
    return publisher, links


def _waiting_answers(publisher: Publisher, seqs: range, answered: list[int]) -> None:
    """One answer waiting per change in ``seqs`` (published one after the other)."""
    for seq in seqs:
        publisher.seq = seq
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
