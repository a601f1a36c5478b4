"""Which broker registrations are audited (docs/security.md "Audit"), over a real NameServer process
with ``--audit-log-file``: a registration that changes nothing (a broker's periodic one, every 30 s
from a Java broker) writes no audit line, on either door; a new broker, a changed topic table and a
broker leaving do."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, poll_until, register_request, running_namesrv, topic


@dataclass
class AuditedNamesrv:
    server: NamesrvProcess
    audit_file: Path

    def lines(self, rpc: str, broker_addr: str) -> list[dict[str, Any]]:
        """The audit lines of ``rpc`` about ``broker_addr`` (either door's field name)."""
        entries = [json.loads(line.split(" ", 2)[2]) for line in self.audit_file.read_text().splitlines()]
        return [e for e in entries if e["audit"] == rpc and broker_addr in (e.get("brokerAddr"), e.get("broker_addr"))]

    def expect(self, rpc: str, broker_addr: str, count: int) -> None:
        """Wait until ``count`` lines are there, then check that no more came."""
        poll_until(lambda: len(self.lines(rpc, broker_addr)) >= count, timeout=10)
        assert len(self.lines(rpc, broker_addr)) == count, self.lines(rpc, broker_addr)


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[AuditedNamesrv]:
    audit_file = tmp_path / "audit.log"
    with running_namesrv(tmp_path / "ns", "--audit-log-file", str(audit_file)) as server:
        yield AuditedNamesrv(server, audit_file)


REMOTING_ADDR = "127.0.0.1:10950"
GRPC_ADDR = "127.0.0.1:10960"


def remoting_register(client: RemotingTestClient, topics: list[str], version: DataVersion, compressed: bool) -> None:
    """REGISTER_BROKER of broker-r as a Java broker sends it every 30 s (a compressed body is
    decoded in a worker thread, a small plain one on the event loop: both paths)."""
    body = bodies.encode_register_broker_body({t: topic(t) for t in topics}, version, compressed=compressed)
    fields = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-r",
        "brokerId": "0",
        "brokerAddr": REMOTING_ADDR,
        "haServerAddr": "127.0.0.1:10951",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    assert client.call(RequestCode.REGISTER_BROKER, fields, body).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_unchanged_remoting_registrations_are_not_audited(audited: AuditedNamesrv, compressed: bool) -> None:
    with RemotingTestClient(audited.server.remoting_address) as client:
        first = DataVersion(0, 1_700_000_000_000, 1)
        remoting_register(client, ["SELF_TEST_TOPIC", "TopicA"], first, compressed)
        audited.expect("REGISTER_BROKER", REMOTING_ADDR, 1)
        for _ in range(3):  # the periodic registration, nothing new: liveness only
            remoting_register(client, ["SELF_TEST_TOPIC", "TopicA"], first, compressed)
        audited.expect("REGISTER_BROKER", REMOTING_ADDR, 1)

        second = DataVersion(0, 1_700_000_060_000, 2)  # a topic created on the broker
        remoting_register(client, ["SELF_TEST_TOPIC", "TopicA", "TopicB"], second, compressed)
        audited.expect("REGISTER_BROKER", REMOTING_ADDR, 2)
        remoting_register(client, ["SELF_TEST_TOPIC", "TopicA", "TopicB"], second, compressed)
        audited.expect("REGISTER_BROKER", REMOTING_ADDR, 2)

        who = {"clusterName": "DefaultCluster", "brokerName": "broker-r", "brokerId": "0", "brokerAddr": REMOTING_ADDR}
        assert client.call(RequestCode.UNREGISTER_BROKER, who).code == ResponseCode.SUCCESS
        audited.expect("UNREGISTER_BROKER", REMOTING_ADDR, 1)
    lines = audited.lines("REGISTER_BROKER", REMOTING_ADDR)
    assert [(e["result"], e["identity"], e["brokerName"]) for e in lines] == [("ok", "anonymous", "broker-r")] * 2


def test_unchanged_grpc_registrations_are_not_audited(audited: AuditedNamesrv) -> None:
    with audited.server.channel() as channel:
        stubs = Stubs(channel)
        first = register_request(broker_name="broker-g", broker_addr=GRPC_ADDR, topics=[topic("TopicG")])
        stubs.ns.RegisterBroker(first, timeout=10)
        audited.expect("RegisterBroker", GRPC_ADDR, 1)
        for _ in range(3):
            stubs.ns.RegisterBroker(first, timeout=10)
        audited.expect("RegisterBroker", GRPC_ADDR, 1)

        changed = register_request(
            broker_name="broker-g",
            broker_addr=GRPC_ADDR,
            topics=[topic("TopicG"), topic("TopicH")],
            version=DataVersion(0, 2, 2),
        )
        stubs.ns.RegisterBroker(changed, timeout=10)
        audited.expect("RegisterBroker", GRPC_ADDR, 2)
        stubs.ns.RegisterBroker(changed, timeout=10)
        audited.expect("RegisterBroker", GRPC_ADDR, 2)

        # The agent's heartbeat and its DataVersion check are not audited either.
        identity: dict[str, Any] = {"cluster_name": "DefaultCluster", "broker_name": "broker-g", "broker_id": 0}
        stubs.ns.BrokerHeartbeat(ns_pb2.BrokerHeartbeatRequest(**identity, broker_addr=GRPC_ADDR), timeout=10)
        stubs.ns.QueryDataVersion(ns_pb2.QueryDataVersionRequest(**identity, broker_addr=GRPC_ADDR), timeout=10)
        stubs.ns.UnregisterBroker(ns_pb2.UnregisterBrokerRequest(**identity, broker_addr=GRPC_ADDR), timeout=10)
        audited.expect("UnregisterBroker", GRPC_ADDR, 1)
    lines = audited.lines("RegisterBroker", GRPC_ADDR)
    assert [(e["result"], e["broker_name"], e["body_bytes"] > 0) for e in lines] == [("ok", "broker-g", True)] * 2
    assert audited.lines("UnregisterBroker", GRPC_ADDR)[0]["removed"] is True
    assert not audited.lines("BrokerHeartbeat", GRPC_ADDR)
    assert not audited.lines("QueryDataVersion", GRPC_ADDR)
