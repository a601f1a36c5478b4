"""``AdminService.GetBrokerLiveTable`` and ``namesrv-admin clusters`` against a real NameServer: one
broker registered over remoting (as a Java broker), one over gRPC; the view names the protocol and
whether a session (the remoting connection, OpenBrokerSession) guards each address."""

from __future__ import annotations

import time

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv_grpc.core.model import DataVersion
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, Stubs, register_request, run_cli, topic
from tests.test_remoting_server import register


def test_live_table_names_protocol_session_age_and_version(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    before = int(time.time() * 1000)
    with RemotingTestClient(namesrv.remoting_address) as client:
        topics = {"J": topic("J"), "J2": topic("J2")}  # one topic alone is a refused increment (S42)
        register(client, "c1", "java-broker", 0, "127.0.0.1:30911", topics, version=DataVersion(1, 2, 3))
        stubs.ns.RegisterBroker(
            register_request(cluster="c1", broker_name="py-broker", broker_addr="127.0.0.1:30921"), timeout=10
        )
        table = stubs.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=10)
        by_addr = {entry.broker_addr: entry for entry in table.brokers}
        java, python = by_addr["127.0.0.1:30911"], by_addr["127.0.0.1:30921"]
        assert (java.cluster_name, java.broker_name, java.broker_id) == ("c1", "java-broker", 0)
        assert java.protocol == admin_pb2.REGISTRATION_PROTOCOL_REMOTING
        assert java.session  # the remoting connection guards it (S15)
        assert (java.data_version.state_version, java.data_version.timestamp, java.data_version.counter) == (1, 2, 3)
        assert python.protocol == admin_pb2.REGISTRATION_PROTOCOL_GRPC
        assert not python.session
        assert python.heartbeat_timeout_millis == 120_000
        assert before <= java.last_update_timestamp_millis <= table.now_millis
        assert java.age_millis == table.now_millis - java.last_update_timestamp_millis
        shown = run_cli("namesrv_grpc.admin.cli", "-n", namesrv.address, "clusters")
        assert shown.returncode == 0, shown.stderr
        rows = {line.split()[3]: line.split() for line in shown.stdout.splitlines()[1:]}
        assert rows["127.0.0.1:30911"][4:6] == ["remoting", "yes"]
        assert rows["127.0.0.1:30921"][4:6] == ["grpc", "no"]
    # the connection closed: the Java broker is gone at once (S15), the gRPC one stays
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        table = stubs.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=10)
        if [e.broker_addr for e in table.brokers] == ["127.0.0.1:30921"]:
            break
        time.sleep(0.02)
    assert [e.broker_addr for e in table.brokers] == ["127.0.0.1:30921"]
