"""The commands (namesrv_grpc.core.commands): each one has the route-table method that applies it,
crosses the link to the route-table process as itself, and comes back with its result."""

from __future__ import annotations

import asyncio
import socket
import zlib
from typing import Any

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core import commands
from namesrv_grpc.core.body import BrokerIdentity
from namesrv_grpc.core.errors import InvalidFieldError
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, QueueData, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.channel import Channel
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.remoting.budget import RemotingLimits
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.remoting_register_body import body_fingerprint, decode_java_register_body
from tests.support import _no_snapshots

BROKER = BrokerIdentity("c1", "broker-a", 0, "10.7.0.1:10911")


def service() -> RouteTableService:
    return RouteTableService(NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None)), _no_snapshots)


def command_types() -> list[type[commands.Command[Any]]]:
    return [
        value
        for value in vars(commands).values()
        if isinstance(value, type) and issubclass(value, commands.Command) and value is not commands.Command
    ]


def test_every_command_has_the_method_that_applies_it() -> None:
    svc = service()
    types = command_types()
    assert len(types) == 18
    missing = [t.__name__ for t in types if svc.method_for(object.__new__(t)) is None]
    assert missing == []
    with pytest.raises(LookupError, match="not a route-table command: tuple"):
        svc.apply(0, ("register_broker",))  # type: ignore[arg-type]


def test_commands_cross_a_real_link_and_come_back_with_their_results() -> None:
    """Over a Unix socket pair, as between a serving process and the route-table process: the
    command arrives equal to what was sent, the route-table service applies it, and the sender gets
    its result (or its error)."""
    svc = service()
    received: list[Any] = []

    async def run() -> list[Any]:
        near_sock, far_sock = socket.socketpair()
        near = Channel(*await asyncio.open_unix_connection(sock=near_sock), "route-table process")
        far = Channel(*await asyncio.open_unix_connection(sock=far_sock), "serving process")

        def on_message(message: tuple[Any, ...]) -> None:
            kind, call_id, command = message
            assert kind == "command"
            received.append(command)
            try:
                far.reply(call_id, True, svc.apply(0, command))
            except Exception as exc:
                far.reply(call_id, False, exc)

        serving = [asyncio.ensure_future(near.serve(lambda m: None)), asyncio.ensure_future(far.serve(on_message))]
        queue = QueueData("broker-a", 4, 4, 6, 0)
        topics = {name: TopicConfig(name, 4, 4) for name in ("T0", "T1")}
        body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
        fingerprint = body_fingerprint(body, False, zlib.crc32(body))
        decoded = decode_java_register_body(body, False, 1 << 20, 100, None)
        sent: list[commands.Command[Any]] = [
            commands.RegisterBroker("remoting", BROKER, "", 0, fingerprint, decoded),
            commands.RegisterTopic("T", (queue,)),
            commands.QueryDataVersion(BROKER, DataVersion(0, 1, 1)),
            commands.WipeWritePerm("broker-a"),
            commands.MasterOf("broker-a"),
            commands.SessionsEnded((("10.7.0.1:10911", 7),), "session ended"),
        ]
        results = [await near.command(command) for command in sent]
        with pytest.raises(InvalidFieldError, match="cluster_name: must not be empty"):
            await near.command(commands.UnregisterBroker(BrokerIdentity("", "", -1, "")))
        assert received[: len(sent)] == sent
        near.close()
        far.close()
        await asyncio.gather(*serving)
        return results

    registered, *results = asyncio.run(run())
    assert registered.result.changed
    assert not registered.body_needed
    assert results == [None, (False, DataVersion(0, 1, 1)), 3, (BROKER.broker_addr, ""), 0]
    assert svc.ns.route_table.topic_queue_table["T"] == {
        "broker-a": QueueData("broker-a", 4, 4, 4, 0)
    }  # PERM_WRITE wiped (S23)


def test_remoting_limits_are_read_from_the_configuration() -> None:
    """The remoting listener's bounds have no defaults of their own: they are the configuration's,
    the per-IP connection cap shared among the serving processes."""
    config = NamesrvConfig(remoting_max_connections_per_ip=10, remoting_accepts_per_turn=9)
    limits = RemotingLimits.from_config(config, workers=4)
    assert (limits.max_connections_per_ip, limits.accepts_per_turn) == (3, 9)
    assert RemotingLimits.from_config().frame_max_length == NamesrvConfig().remoting_frame_max_length
