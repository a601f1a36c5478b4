"""A serving process's writes (namesrv_grpc.processes.route_table_client): big registration bodies go
to the route-table process by fingerprint first, and only when it asks for them in full."""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from typing import Any

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.commands import Command, RegisterBroker, RegistrationReply
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, RegisterBrokerResult, TopicConfig
from namesrv_grpc.core.processor import BrokerIdentity, NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.route_table_client import ELIDED_BODY_MIN_BYTES, RouteTableClient
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.remoting import bodies
from namesrv_grpc.remoting.register_body import body_fingerprint
from tests.support import _no_snapshots

APPLIED = RegistrationReply(RegisterBrokerResult(changed=False), {"k": "v"})
ASKED = RegistrationReply(RegisterBrokerResult(), {}, body_needed=True)


class RouteTableProcess:
    """Stands for the link: answers each call with the next reply, keeps what was sent."""

    def __init__(self, *replies: RegistrationReply) -> None:
        self.replies = list(replies)
        self.sent: list[RegisterBroker] = []

    async def command(self, command: Command[Any]) -> Any:
        assert isinstance(command, RegisterBroker)
        self.sent.append(command)
        return self.replies.pop(0)


def registration(size: int) -> RegisterBroker:
    body = b"x" * size
    identity = BrokerIdentity("c", "broker-a", 0, "10.0.0.1:10911")
    return RegisterBroker("remoting", identity, "", 0, body, False, (1, len(body), False))


def send(link: RouteTableProcess, sent: RegisterBroker) -> RegistrationReply:
    return asyncio.run(RouteTableClient(link).send(sent))  # type: ignore[arg-type]


def test_a_big_body_the_table_holds_is_not_sent() -> None:
    link = RouteTableProcess(APPLIED)
    assert send(link, registration(ELIDED_BODY_MIN_BYTES)) is APPLIED
    assert [(r.body, r.body_elided, r.body_fingerprint) for r in link.sent] == [
        (b"", True, (1, ELIDED_BODY_MIN_BYTES, False))
    ]


def test_a_big_body_the_table_does_not_hold_is_sent_when_asked() -> None:
    link = RouteTableProcess(ASKED, APPLIED)
    full = registration(ELIDED_BODY_MIN_BYTES + 1)
    assert send(link, full) is APPLIED
    assert [r.body_elided for r in link.sent] == [True, False]
    assert link.sent[1] is full


def test_a_small_body_is_sent_at_once() -> None:
    link = RouteTableProcess(APPLIED)
    small = registration(ELIDED_BODY_MIN_BYTES - 1)
    assert send(link, small) is APPLIED
    assert link.sent == [small]


def test_the_route_table_process_asks_for_a_body_it_does_not_hold() -> None:
    """The other end (RouteTableService): an elided body it does not hold changes nothing and is
    asked for; once the full body is applied, the same fingerprint elided is applied."""
    ns = NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None))
    ns.track_changes()
    service = RouteTableService(ns, _no_snapshots)
    topics = {name: TopicConfig(name, 4, 4) for name in ("T", "T2")}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    identity = BrokerIdentity("c", "broker-a", 0, "10.0.0.1:10911")
    full = RegisterBroker("remoting", identity, "", 0, body, False, body_fingerprint(body, False, zlib.crc32(body)))
    elided = dataclasses.replace(full, body=b"", body_elided=True)
    assert service.apply(0, elided).body_needed
    assert not ns.route_table.broker_live_table
    assert ns.take_change() is None
    assert not service.apply(0, full).body_needed
    assert ns.route_table.pickup_topic_route_data("T") is not None
    reply = service.apply(0, elided)
    assert not reply.body_needed
    assert not reply.result.changed  # a periodic re-registration
    changed = bodies.encode_register_broker_body({"U": TopicConfig("U", 4, 4)}, DataVersion(0, 2, 2), compressed=False)
    other = dataclasses.replace(elided, body_fingerprint=body_fingerprint(changed, False, zlib.crc32(changed)))
    assert service.apply(0, other).body_needed
