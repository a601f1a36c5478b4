"""The route-table process's record of which serving process bound each broker's session (S15, and
what it unbinds when a serving process exits): one entry per broker address, however often it registers."""

from __future__ import annotations

import zlib

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.body import BrokerIdentity
from namesrv_grpc.core.commands import RegisterBroker, SessionsEnded
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.wire import bodies
from namesrv_grpc.wire.remoting_register_body import body_fingerprint, decode_java_register_body
from tests.support import _no_snapshots

BROKER = BrokerIdentity("c1", "broker-a", 0, "10.6.0.1:10911")


def service() -> RouteTableService:
    return RouteTableService(NameServer(NamesrvConfig(), RouteInfoManager(), KVConfigManager(None)), _no_snapshots)


def registration(identity: BrokerIdentity = BROKER, instance_id: str = "remoting-connection-1") -> RegisterBroker:
    """A Java broker's periodic REGISTER_BROKER over one remoting connection (binds a session)."""
    topics = {"T1": TopicConfig("T1", 4, 4), "T2": TopicConfig("T2", 4, 4)}
    body = bodies.encode_register_broker_body(topics, DataVersion(0, 1, 1), compressed=False)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return RegisterBroker(
        "remoting", identity, identity.broker_addr, 0, body_fingerprint(body, False, crc),
        decode_java_register_body(body, False, 1 << 20, 100, None), instance_id=instance_id, bind_session=True,
    )  # fmt: skip


def test_a_broker_registering_every_30_s_is_remembered_once() -> None:
    """Each remoting registration binds a new session; only the last one can remove the broker, so
    older ones are forgotten (they were kept for good: ~550 MB a day for 1,000 brokers)."""
    svc = service()
    sessions = [svc.apply(1, registration()).session_id for _ in range(1_000)]
    assert len(set(sessions)) == 1_000
    assert svc.held_sessions(1) == 1

    assert not svc.apply(1, SessionsEnded(((BROKER.broker_addr, sessions[0]),), "remoting connection closed"))
    assert svc.held_sessions(1) == 1  # an old session's end removes nothing and forgets nothing newer
    assert svc.apply(1, SessionsEnded(((BROKER.broker_addr, sessions[-1]),), "remoting connection closed")) == 1
    assert svc.held_sessions(1) == 0
    assert svc.ns.route_table.broker_live_table == {}


def test_a_serving_process_that_exits_keeps_its_brokers_unbound() -> None:
    """Our process died, not the brokers: the brokers whose last session it bound stay in the routes
    (their next registration or the S13 expiry decides), their sessions are unbound, and a later end
    of such a session removes nothing (it is no longer the bound one)."""
    svc = service()
    moved = BrokerIdentity("c1", "broker-b", 0, "10.6.0.2:10911")
    first = svc.apply(1, registration()).session_id
    svc.apply(1, registration(moved, "remoting-connection-1"))
    moved_session = svc.apply(2, registration(moved, "remoting-connection-2")).session_id
    assert (svc.held_sessions(1), svc.held_sessions(2)) == (2, 1)

    assert svc.serving_process_exited(1) == 1  # broker-b's last session is process 2's
    assert svc.held_sessions(1) == 0
    assert set(svc.ns.route_table.broker_live_table) == {BROKER.broker_addr, moved.broker_addr}
    assert svc.ns.route_table.broker_live_table[BROKER.broker_addr].session_id == 0
    assert svc.ns.route_table.broker_live_table[moved.broker_addr].session_id == moved_session
    assert svc.apply(1, SessionsEnded(((BROKER.broker_addr, first),), "remoting connection closed")) == 0
    assert BROKER.broker_addr in svc.ns.route_table.broker_live_table
    # Its next registration binds a new session, through a live process; S15 applies to that one.
    again = svc.apply(2, registration()).session_id
    assert again not in (0, first)
    assert svc.apply(2, SessionsEnded(((BROKER.broker_addr, again),), "remoting connection closed")) == 1
    assert set(svc.ns.route_table.broker_live_table) == {moved.broker_addr}


def test_a_broker_kept_after_its_serving_process_exited_expires_as_any_silent_broker_does() -> None:
    """S13 still applies to a broker kept unbound: silent past its heartbeat timeout, it goes; a
    registration before that keeps it."""
    now = [1_000_000]
    svc = RouteTableService(
        NameServer(NamesrvConfig(), RouteInfoManager(lambda: now[0]), KVConfigManager(None)), _no_snapshots
    )
    other = BrokerIdentity("c1", "broker-b", 0, "10.6.0.2:10911")
    svc.apply(1, registration())
    svc.apply(1, registration(other, "remoting-connection-2"))
    assert svc.serving_process_exited(1) == 2
    timeout = svc.ns.route_table.broker_live_table[BROKER.broker_addr].heartbeat_timeout_millis
    now[0] += timeout // 2
    svc.apply(2, registration(other, "remoting-connection-3"))  # broker-b registers again
    now[0] += timeout // 2 + 1
    assert [r.broker_addr for r in svc.ns.route_table.scan_not_active_broker()] == [BROKER.broker_addr]
    assert set(svc.ns.route_table.broker_live_table) == {other.broker_addr}
