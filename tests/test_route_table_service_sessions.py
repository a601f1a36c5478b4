"""The route-table process's record of which serving process bound each broker's session (S15, what
it removes when a serving process exits): one entry per broker address, however often it registers."""

from __future__ import annotations

import zlib

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.processor import BrokerIdentity, NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.core.writes import Registration
from namesrv_grpc.processes.route_table_service import SERVING_PROCESS_EXITED, RouteTableService
from namesrv_grpc.remoting import bodies
from namesrv_grpc.remoting.register_body import body_fingerprint
from tests.support import _no_snapshots

BROKER = BrokerIdentity("c1", "broker-a", 0, "10.6.0.1:10911")


def service() -> RouteTableService:
    return RouteTableService(NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None)), _no_snapshots)


def registration(identity: BrokerIdentity = BROKER, instance_id: str = "remoting-connection-1") -> Registration:
    """A Java broker's periodic REGISTER_BROKER over one remoting connection (binds a session)."""
    topics = {"T1": TopicConfig("T1", 4, 4), "T2": TopicConfig("T2", 4, 4)}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return Registration(
        "remoting", identity, identity.broker_addr, 0, body, False, body_fingerprint(body, False, crc),
        instance_id=instance_id, bind_session=True,
    )  # fmt: skip


def test_a_broker_registering_every_30_s_is_remembered_once() -> None:
    """Each remoting registration binds a new session; only the last one can remove the broker, so
    older ones are forgotten (they were kept for good: ~550 MB a day for 1,000 brokers)."""
    svc = service()
    sessions = [svc.register_broker(1, registration()).session_id for _ in range(1_000)]
    assert len(set(sessions)) == 1_000
    assert svc.held_sessions(1) == 1

    assert not svc.sessions_ended(1, [(BROKER.broker_addr, sessions[0])], "remoting connection closed")
    assert svc.held_sessions(1) == 1  # an old session's end removes nothing and forgets nothing newer
    assert svc.sessions_ended(1, [(BROKER.broker_addr, sessions[-1])], "remoting connection closed") == 1
    assert svc.held_sessions(1) == 0
    assert svc.ns.route_table.broker_live_table == {}


def test_a_serving_process_that_exits_removes_the_brokers_whose_last_session_it_bound() -> None:
    svc = service()
    moved = BrokerIdentity("c1", "broker-b", 0, "10.6.0.2:10911")
    svc.register_broker(1, registration())
    svc.register_broker(1, registration(moved, "remoting-connection-1"))
    svc.register_broker(2, registration(moved, "remoting-connection-2"))  # now bound through process 2
    assert (svc.held_sessions(1), svc.held_sessions(2)) == (2, 1)

    ended = svc.serving_process_exited(1)
    assert svc.held_sessions(1) == 0
    assert svc.sessions_ended(1, ended, SERVING_PROCESS_EXITED) == 1  # broker-b's last session is process 2's
    assert set(svc.ns.route_table.broker_live_table) == {moved.broker_addr}
    assert svc.held_sessions(1) == 0
