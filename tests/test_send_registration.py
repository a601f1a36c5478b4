"""A registration's way from a door to the route-table process (namesrv_grpc.core.commands.send_registration
and RouteTableService.register_broker): by the body's fingerprint alone when the serving process's
replica says the table holds that body or does not know the broker; a registered broker's new body
decoded by the door, skipping the topic table held, and sent with it; decoded (again) when the
route-table process asks for it."""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from typing import Any

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.body import BrokerIdentity, DecodedBody
from namesrv_grpc.core.commands import Command, RawBody, RegisterBroker, RegistrationReply, send_registration
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, RegisterBrokerResult, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.remoting_register_body import body_fingerprint, decode_java_register_body
from tests.support import _no_snapshots

APPLIED = RegistrationReply(RegisterBrokerResult(changed=False), {"k": "v"})
IDENTITY = BrokerIdentity("c", "broker-a", 0, "10.0.0.1:10911")
DECODED = DecodedBody(None, DataVersion(0, 1, 2), (), 77)


def asked(known: int | None) -> RegistrationReply:
    return RegistrationReply(RegisterBrokerResult(), {}, body_needed=True, known_topics_fingerprint=known)


class RouteTableProcess:
    """Stands for the route-table process: answers each command with the next reply, keeps them."""

    def __init__(self, *replies: RegistrationReply) -> None:
        self.replies = list(replies)
        self.sent: list[RegisterBroker] = []

    async def send(self, command: Command[Any]) -> Any:
        assert isinstance(command, RegisterBroker)
        self.sent.append(command)
        return self.replies.pop(0)


FINGERPRINT = (1, 2, False)
"""The body fingerprint of every registration sent here."""
SAME = (FINGERPRINT, 77)
"""The replica holds this body for the broker (topics fingerprint 77)."""
OTHER = ((9, 9, False), 77)
"""The replica holds another body, whose topic table has fingerprint 77."""


def register(
    link: RouteTableProcess,
    raw: RawBody | None = None,
    held: tuple[tuple[int, int, bool] | None, int | None] | None = SAME,
) -> tuple[RegistrationReply, list[int | None]]:
    """send_registration over ``link``, the replica holding ``held``; the reply and the fingerprints
    the decoder was given."""
    asked_with: list[int | None] = []

    async def decode(known: int | None) -> DecodedBody:
        asked_with.append(known)
        return DECODED

    command = RegisterBroker("remoting", IDENTITY, "", 0, FINGERPRINT)
    return asyncio.run(send_registration(link, command, decode, raw, held)), asked_with


def test_a_body_the_table_holds_is_never_decoded() -> None:
    link = RouteTableProcess(APPLIED)
    assert register(link) == (APPLIED, [])
    assert [c.decoded for c in link.sent] == [None]


def test_a_registered_brokers_new_body_is_decoded_and_sent_in_one_trip() -> None:
    """Another body than the one held is decoded at once, skipping the topic table held, and sent
    with the command: one trip, not two."""
    link = RouteTableProcess(APPLIED)
    assert register(link, held=OTHER) == (APPLIED, [77])
    assert [c.decoded for c in link.sent] == [DECODED]


def test_a_broker_the_replica_does_not_know_is_asked_for_its_body_first() -> None:
    """A broker's first registration goes without its body: the route-table process refuses a
    broker past routeTableMaxBrokers before anything is decoded, and asks for the body otherwise."""
    link = RouteTableProcess(asked(None), APPLIED)
    assert register(link, held=None) == (APPLIED, [None])
    assert [c.decoded for c in link.sent] == [None, DECODED]
    refused = RegistrationReply(RegisterBrokerResult(), {})  # stands for a refusal: no body asked for
    link = RouteTableProcess(refused)
    assert register(link, held=None) == (refused, [])


def test_a_replica_behind_the_table_costs_a_second_trip_and_no_more() -> None:
    """The replica said the body was held, but the table holds another one by now: asked for, the
    body is decoded skipping the topics the table holds."""
    link = RouteTableProcess(asked(78), APPLIED)
    assert register(link) == (APPLIED, [78])
    assert [c.decoded for c in link.sent] == [None, DECODED]


def test_when_the_skipped_topic_table_is_gone_every_topic_is_decoded() -> None:
    """Another registration of the broker changed its topics between the ask and the decoded body,
    or the replica's topics fingerprint was behind: at most two decodes, the second in full."""
    link = RouteTableProcess(asked(77), asked(78), APPLIED)
    assert register(link) == (APPLIED, [77, None])
    assert len(link.sent) == 3
    link = RouteTableProcess(asked(78), APPLIED)
    assert register(link, held=OTHER) == (APPLIED, [77, None])
    assert [c.decoded for c in link.sent] == [DECODED, DECODED]


def test_a_body_left_to_the_route_table_process_is_sent_as_it_arrived() -> None:
    """A compressed or very large body (runtime.policy.decoded_by_door) is not decoded by the door:
    sent as it arrived when the table asks for it, or at once when the replica holds another body."""
    raw = RawBody(b"compressed bytes", compressed=True)
    link = RouteTableProcess(APPLIED)
    assert register(link, raw) == (APPLIED, [])
    assert [(c.decoded, c.raw) for c in link.sent] == [(None, None)]
    link = RouteTableProcess(asked(77), APPLIED)
    assert register(link, raw) == (APPLIED, [])
    assert [(c.decoded, c.raw) for c in link.sent] == [(None, None), (None, raw)]
    link = RouteTableProcess(APPLIED)
    assert register(link, raw, OTHER) == (APPLIED, [])
    assert [(c.decoded, c.raw) for c in link.sent] == [(None, raw)]


def test_the_route_table_process_decodes_a_compressed_body_skipping_the_topics_it_holds() -> None:
    ns = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
    service = RouteTableService(ns, _no_snapshots)
    topics = {name: TopicConfig(name, 4, 4) for name in ("T", "T2")}
    for counter in (1, 2):  # the second: the same topics, a new DataVersion
        body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, counter), compressed=True)
        bare = RegisterBroker("remoting", IDENTITY, "", 0, body_fingerprint(body, True, zlib.crc32(body)))
        assert service.apply(0, bare).body_needed
        assert not service.apply(0, dataclasses.replace(bare, raw=RawBody(body, compressed=True))).body_needed
        assert ns.route_table.live_info(IDENTITY.broker_addr).data_version == DataVersion(0, 1, counter)  # type: ignore[union-attr]
    assert set(ns.route_table.topic_queue_table) == {"T", "T2"}


def test_the_route_table_process_asks_for_a_body_it_does_not_hold() -> None:
    """The other end (RouteTableService): a registration without a body it does not hold changes
    nothing and is asked for (with the topics fingerprint it holds); once a decoded body is applied,
    the same fingerprint without a body is applied; a body decoded without a topic table it no
    longer holds is asked for again."""
    ns = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
    ns.track_changes()
    service = RouteTableService(ns, _no_snapshots)
    topics = {name: TopicConfig(name, 4, 4) for name in ("T", "T2")}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    bare = RegisterBroker("remoting", IDENTITY, "", 0, body_fingerprint(body, False, zlib.crc32(body)))
    reply = service.apply(0, bare)
    assert (reply.body_needed, reply.known_topics_fingerprint) == (True, None)
    assert not ns.route_table.broker_live_table
    assert ns.take_change() is None
    decoded = decode_java_register_body(body, False, 1 << 20, 100, None)
    assert not service.apply(0, dataclasses.replace(bare, decoded=decoded)).body_needed
    assert ns.route_table.pickup_topic_route_data("T") is not None
    reply = service.apply(0, bare)
    assert not reply.body_needed
    assert not reply.result.changed  # a periodic re-registration
    changed = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 2), compressed=False)
    other = RegisterBroker("remoting", IDENTITY, "", 0, body_fingerprint(changed, False, zlib.crc32(changed)))
    reply = service.apply(0, other)
    assert reply.body_needed
    assert reply.known_topics_fingerprint == decoded.topics_fingerprint
    stale = DecodedBody(None, DataVersion(0, 1, 2), (), 12345)  # skipped a topic table not held
    assert service.apply(0, dataclasses.replace(other, decoded=stale)).body_needed
    only_version = decode_java_register_body(changed, False, 1 << 20, 100, reply.known_topics_fingerprint)
    assert only_version.topic_configs is None
    assert not service.apply(0, dataclasses.replace(other, decoded=only_version)).body_needed
    assert ns.route_table.live_info(IDENTITY.broker_addr).data_version == DataVersion(0, 1, 2)  # type: ignore[union-attr]
