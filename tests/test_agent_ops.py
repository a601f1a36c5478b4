"""Agent behaviour operators depend on: brokerIP1 from the network interfaces (RocketMQ
``NetworkUtil.getLocalAddress``), the loopback warning, an explicit --topics-json that is missing,
and the standard process series on both programs' /metrics."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from prometheus_client import generate_latest

from broker_agent import config as agent_config
from broker_agent.config import load_broker_config, loopback_warning, pick_local_address
from broker_agent.metrics import AgentMetrics
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.metrics import NamesrvMetrics
from tests.support import run_cli


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        (["127.0.0.1", "::1", "10.1.2.3"], "10.1.2.3"),  # loopback never counts
        (["192.168.1.5", "172.17.0.2", "10.0.0.7"], "172.17.0.2"),  # first not 127.0/192.168/0.
        (["192.168.1.5", "192.168.9.9"], "192.168.9.9"),  # only 192.168: the last one
        (["fe80::1%eth0", "fd00::2"], "fd00::2"),  # no IPv4: first IPv6 that is not link-local
        (["fd00::2", "192.168.1.5"], "192.168.1.5"),  # IPv4 preferred
        (["127.0.0.1", "::1"], None),
    ],
)
def test_pick_local_address_as_rocketmq(addresses: list[str], expected: str | None) -> None:
    assert pick_local_address(addresses) == expected


def test_broker_ip1_comes_from_interfaces_not_the_host_name() -> None:
    """The issue's host: its name resolves to 127.0.0.1 while eth0 has a routable address."""
    interfaces = [("lo", "127.0.0.1"), ("eth0", "198.51.100.7"), ("eth0", "fe80::1%eth0")]
    with (
        mock.patch.object(agent_config, "interface_addresses", return_value=interfaces),
        mock.patch("socket.gethostbyname", return_value="127.0.0.1"),
    ):
        config = load_broker_config({"brokerName": "broker-a", "namesrvAddr": "10.0.0.1:9876"}, "broker.conf")
    assert config.broker_ip1 == "198.51.100.7"
    assert config.broker_addr == "198.51.100.7:10911"


def test_interface_addresses_lists_this_hosts_up_interfaces() -> None:
    found = agent_config.interface_addresses()
    assert found, "no interface address at all"
    assert all(":" not in name for name, _ in found)


@pytest.mark.parametrize(
    ("ip1", "namesrv", "warns"),
    [
        ("127.0.0.1", "10.0.0.1:9876", True),
        ("127.0.0.1", "127.0.0.1:9876;namesrv-0.namesrv:9876", True),
        ("127.0.0.1", "127.0.0.1:9876;localhost:9876", False),
        ("10.0.0.5", "10.0.0.1:9876", False),
    ],
)
def test_loopback_warning(ip1: str, namesrv: str, warns: bool) -> None:
    config = load_broker_config({"brokerName": "b", "brokerIP1": ip1, "namesrvAddr": namesrv}, "broker.conf")
    warning = loopback_warning(config)
    assert (warning is not None) == warns
    if warning:
        assert ip1 in warning
        assert "brokerIP1" in warning


def write_conf(tmp_path: Path, store: Path) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nnamesrvAddr=127.0.0.1:1\nstorePathRootDir={store}\n", encoding="utf-8")
    return conf


def test_explicit_missing_topics_json_is_an_error(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, tmp_path / "store")
    missing = tmp_path / "elsewhere" / "topics.json"
    result = run_cli("broker_agent", "--broker-config", str(conf), "--topics-json", str(missing), timeout=30)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"broker-agent: --topics-json {missing}: no such file")


def test_default_topics_json_may_be_missing_also_when_named(tmp_path: Path) -> None:
    """A fresh broker has no topics.json yet (S38): its default path is no error, also when it is
    given with --topics-json (as the Kubernetes sidecar does). The agent then runs (and is stopped
    by the timeout of this check: no NameServer listens)."""
    store = tmp_path / "store"
    conf = write_conf(tmp_path, store)
    for extra in ([], ["--topics-json", str(store / "config" / "topics.json")]):
        with pytest.raises(Exception, match="timed out"):
            run_cli("broker_agent", "--broker-config", str(conf), *extra, timeout=4)


def metric_names(text: str) -> set[str]:
    return {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_process_and_python_series_on_both_registries() -> None:
    for registry in (NamesrvMetrics(RouteInfoManager()).registry, AgentMetrics().registry):
        names = metric_names(generate_latest(registry).decode())
        for wanted in (
            "process_start_time_seconds",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_cpu_seconds_total",
            "python_info",
        ):
            assert wanted in names
    namesrv = metric_names(generate_latest(NamesrvMetrics(RouteInfoManager()).registry).decode())
    assert {"namesrv_route_table_digest", "namesrv_broker_registration_conflicts_total"} <= namesrv
