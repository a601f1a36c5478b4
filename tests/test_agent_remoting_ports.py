"""The agent speaks gRPC; a broker.conf ``namesrvAddr`` names the NameServers' remoting ports (9876)
for the Java broker. ``grpcNamesrvAddr`` (or ``--namesrv-addr``) gives the agent the gRPC ports; when
the agent is pointed at a remoting port anyway it says so in one clear line naming the port to use."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from broker_agent.config import load_broker_config
from tests.support import running_namesrv, spawn_agent


def test_grpc_namesrv_addr_is_preferred_over_namesrv_addr() -> None:
    props = {"brokerName": "b", "namesrvAddr": "ns1:9876;ns2:9876", "grpcNamesrvAddr": "ns1:8081;ns2:8081"}
    assert load_broker_config(props, "broker.conf", environ={}).namesrv_addrs == ("ns1:8081", "ns2:8081")
    assert load_broker_config(props, "broker.conf", namesrv_addr_override="ns3:8081", environ={}).namesrv_addrs == (
        "ns3:8081",
    )
    del props["grpcNamesrvAddr"]
    assert load_broker_config(props, "broker.conf", environ={}).namesrv_addrs == ("ns1:9876", "ns2:9876")


def test_agent_pointed_at_the_remoting_port_says_which_port_to_use(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    with running_namesrv(tmp_path / "ns") as server:
        conf.write_text(
            "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerIP1=127.0.0.1\n"
            f"namesrvAddr={server.remoting_address}\nstorePathRootDir={tmp_path / 'store'}\n"
        )
        agent = spawn_agent("--broker-config", str(conf), "--no-sessions")
        try:
            deadline = time.monotonic() + 30
            lines: list[str] = []
            assert agent.stderr is not None
            while time.monotonic() < deadline:
                line = agent.stderr.readline()
                if not line:
                    break
                lines.append(line)
                if "speaks RocketMQ remoting" in line:
                    break
        finally:
            agent.send_signal(signal.SIGTERM)
            rest = agent.communicate(timeout=30)[1]
    text = "".join(lines) + rest
    hits = [line for line in text.splitlines() if "speaks RocketMQ remoting" in line]
    assert len(hits) == 1, text[-3000:]
    assert f"NameServer {server.remoting_address} speaks RocketMQ remoting, not gRPC" in hits[0]
    assert "--namesrv-addr 127.0.0.1:8081" in hits[0]
    assert "grpcNamesrvAddr" in hits[0]
