"""Rough edges an operator met while migrating a cluster (issue 22), each pinned:

- the agent's first registration and its liveness session do not race (one registration, and no
  line that reads like an error on a healthy start);
- a round that reached no NameServer is summarised as a WARNING;
- the remoting-port hint names where the address came from (``--namesrv-addr``, ``grpcNamesrvAddr``,
  ``namesrvAddr``, ``NAMESRV_ADDR``);
- broker.conf enum values the Java broker cannot parse (``brokerRole = slave``) are refused, with
  what the Java broker would silently do;
- ``namesrv`` says at start where its configuration came from and what becomes of
  ``UpdateNamesrvConfig`` changes, and a restart without ``-c`` on ``configStorePath`` forgets them
  (as Java's ``NamesrvStartup`` does).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_agent.client import remoting_port_message
from broker_agent.config import load_broker_config
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.runtime.properties import ConfigError
from tests.metrics_support import scrape
from tests.support import (
    LineWatcher,
    NamesrvProcess,
    _env,
    fixture_path,
    free_port,
    run_cli,
    running_namesrv,
    spawn_agent,
    spawn_namesrv,
)

QUICKSTART = fixture_path("topics-quickstart.json")


def stop(agent: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 20 s (a LineWatcher reads the agent's stderr meanwhile)."""
    if agent.poll() is None:
        agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait(timeout=5)


# ------------------------------------------------------------------------------------------- agent


def test_agent_start_registers_once_and_then_opens_its_session(tmp_path: Path) -> None:
    port = free_port()
    with running_namesrv(tmp_path / "ns", "--metrics-port", str(port)) as namesrv:
        agent = spawn_agent(
            "--broker-config", str(fixture_path("broker-a.properties")), "--topics-json", str(QUICKSTART),
            "--namesrv-addr", namesrv.address, "--set", "brokerIP1=127.0.0.1",
        )  # fmt: skip
        try:
            watcher = LineWatcher(agent.stderr)
            watcher.wait_for("session with", timeout=30)
            time.sleep(1.0)  # a second registration, if the session asked for one, would be in by now
            registrations = scrape(f"http://127.0.0.1:{port}/metrics").find("namesrv_registrations_total")
        finally:
            stop(agent)
    log = "".join(watcher.lines)
    assert sum(s.value for s in registrations) == 1, log
    assert "does not have this broker" not in log
    assert "asks to register" not in log
    assert "round 1: registered" in log


def test_round_that_reached_no_namesrv_is_a_warning(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    agent = spawn_agent(
        "--broker-config", str(fixture_path("broker-a.properties")), "--topics-json", str(QUICKSTART),
        "--namesrv-addr", dead, "--set", "brokerIP1=127.0.0.1", "--no-sessions",
    )  # fmt: skip
    try:
        watcher = LineWatcher(agent.stderr)
        watcher.wait_for("round 1:", timeout=60)
    finally:
        stop(agent)
    (line,) = [line for line in watcher.lines if "round 1:" in line]
    assert " WARNING broker_agent.agent: round 1: registered" in line
    assert "with 0/1 NameServers" in line


def test_remoting_port_hint_names_where_the_address_came_from(tmp_path: Path) -> None:
    base = {"brokerName": "b"}
    sources = {
        "--namesrv-addr": load_broker_config(base, "f", namesrv_addr_override="n:9876", environ={}),
        "grpcNamesrvAddr": load_broker_config({**base, "grpcNamesrvAddr": "n:9876"}, "f", environ={}),
        "namesrvAddr": load_broker_config({**base, "namesrvAddr": "n:9876"}, "f", environ={}),
        "NAMESRV_ADDR": load_broker_config(base, "f", environ={"NAMESRV_ADDR": "n:9876"}),
    }
    for source, config in sources.items():
        assert config.namesrv_addr_source == source
    assert "--namesrv-addr names the remoting port" in remoting_port_message("n:9876", "--namesrv-addr")
    assert "the environment's NAMESRV_ADDR names" in remoting_port_message("n:9876", "NAMESRV_ADDR")
    assert "--namesrv-addr n:8081" in remoting_port_message("n:9876", "NAMESRV_ADDR")

    # End to end: NAMESRV_ADDR naming a remoting port, broker.conf without namesrvAddr.
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nbrokerIP1=127.0.0.1\nstorePathRootDir={tmp_path / 'store'}\n")
    with running_namesrv(tmp_path / "ns") as namesrv:
        agent = subprocess.Popen(
            [sys.executable, "-m", "broker_agent", "-c", str(conf), "--no-sessions"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**_env(), "NAMESRV_ADDR": namesrv.remoting_address},
        )
        try:
            watcher = LineWatcher(agent.stderr)
            watcher.wait_for("speaks RocketMQ remoting", timeout=30)
        finally:
            stop(agent)
    (hint,) = [line for line in watcher.lines if "speaks RocketMQ remoting" in line]
    assert f"NameServer {namesrv.remoting_address} speaks RocketMQ remoting" in hint
    assert "the environment's NAMESRV_ADDR names (as every RocketMQ tool reads it) the remoting port" in hint


@pytest.mark.parametrize(
    ("key", "value", "silently"),
    [
        ("brokerRole", "slave", "brokerRole=ASYNC_MASTER (a master, not the slave it asks for)"),
        ("brokerRole", "async_master", "brokerRole=ASYNC_MASTER (the default)"),
        ("brokerRole", "Sync_Master", "brokerRole=ASYNC_MASTER (not SYNC_MASTER)"),
        ("brokerRole", "MASTER", "brokerRole=ASYNC_MASTER (the default)"),
        ("flushDiskType", "sync_flush", "flushDiskType=ASYNC_FLUSH (not SYNC_FLUSH)"),
        ("defaultMessageRequestMode", "pop", "defaultMessageRequestMode=PULL (not POP)"),
    ],
)
def test_enum_values_the_java_broker_cannot_parse_are_refused(key: str, value: str, silently: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_broker_config(
            {"brokerName": "b", "brokerId": "1", key: value}, "broker.conf", environ={"NAMESRV_ADDR": "n:8081"}
        )
    message = str(caught.value)
    assert message.startswith(f"broker.conf: {key}: {value!r} is not one of")
    assert "the Java broker cannot parse it" in message
    assert message.endswith(f"would silently run with {silently}")


def test_values_java_reads_are_accepted_and_numbers_java_cannot_read_refused() -> None:
    env = {"NAMESRV_ADDR": "n:8081"}
    config = load_broker_config(
        {"brokerName": "b", "brokerRole": "SLAVE", "brokerId": "2", "flushDiskType": "SYNC_FLUSH"}, "f", environ=env
    )
    assert config.broker_role == "SLAVE"
    with pytest.raises(ConfigError, match="would ignore it without a word and use 10911"):
        load_broker_config({"brokerName": "b", "listenPort": "10_921"}, "f", environ=env)
    with pytest.raises(ConfigError, match=r"Boolean\.parseBoolean reads it as false"):
        load_broker_config({"brokerName": "b", "forceRegister": "yes"}, "f", environ=env)


def test_agent_exits_2_on_a_lower_case_broker_role(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nbrokerId=1\nbrokerRole=slave\nnamesrvAddr=127.0.0.1:8081\n")
    result = run_cli("broker_agent", "-c", str(conf), "--topics-json", str(QUICKSTART))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"broker-agent: {conf}: brokerRole: 'slave' is not one of ASYNC_MASTER, SYNC_MASTER, SLAVE (exact, upper "
        "case): the Java broker cannot parse it and would silently run with brokerRole=ASYNC_MASTER (a master, not "
        "the slave it asks for)"
    )


# ------------------------------------------------------------------------------------ namesrv config


def config_of_a_start(workdir: Path, *extra: str) -> tuple[dict[str, str], NamesrvProcess]:
    """Start a NameServer in ``workdir`` with ``extra``, read its effective configuration
    (``namesrv-admin config``), stop it; the configuration and the stopped server (for its log)."""
    server = spawn_namesrv(workdir, *extra)
    try:
        config = json.loads(run_cli("namesrv_grpc.admin.cli", "-n", server.address, "config").stdout)["config"]
    finally:
        server.stop()
    return config, server


def test_update_namesrv_config_persists_where_the_start_line_says(tmp_path: Path) -> None:
    workdir = tmp_path / "ns"
    store = workdir / "namesrv.properties"
    first = spawn_namesrv(workdir)
    try:
        changed = run_cli("namesrv_grpc.admin.cli", "-n", first.address, "config", "scanNotActiveBrokerInterval=7000")
        assert changed.returncode == 0, changed.stderr
    finally:
        first.stop()
    log = first.stderr_path.read_text()
    assert (
        "configuration from defaults + flags --host --port --remoting-port --kv-config-path --config-store-path" in log
    )
    assert f"UpdateNamesrvConfig changes are written to {store.resolve()} (configStorePath)" in log
    assert "scanNotActiveBrokerInterval=7000" in store.read_text()

    # A restart without -c on configStorePath forgets the change, and says so.
    config, second = config_of_a_start(workdir)
    assert config["scanNotActiveBrokerInterval"] == str(NamesrvConfig().scan_not_active_broker_interval)
    assert (
        f"WARNING namesrv: {store.resolve()} (configStorePath) exists but is not read" in second.stderr_path.read_text()
    )

    # Started with -c on it, the change is back.
    config, third = config_of_a_start(workdir, "-c", str(store))
    assert config["scanNotActiveBrokerInterval"] == "7000"
    assert f"{store.resolve()}, the -c file: kept at restart (flags given at the next start override it)" in (
        third.stderr_path.read_text()
    )


def test_started_with_c_on_a_config_store_not_written_yet_it_keeps_run_time_changes(tmp_path: Path) -> None:
    """The image, the Kubernetes manifest and the systemd unit start ``namesrv -c STORE
    --config-store-path STORE``: on the first start STORE does not exist (defaults), an
    UpdateNamesrvConfig writes it, and the same command line keeps the change at restart. A missing
    ``-c`` file that is not the store is still an error (exit 2, as Java's NamesrvStartup)."""
    workdir = tmp_path / "ns"
    store = workdir / "namesrv.properties"
    first = spawn_namesrv(workdir, "-c", str(store))
    try:
        changed = run_cli("namesrv_grpc.admin.cli", "-n", first.address, "config", "scanNotActiveBrokerInterval=7000")
        assert changed.returncode == 0, changed.stderr
    finally:
        first.stop()
    assert f"{store.resolve()} (-c, not written yet)" in first.stderr_path.read_text()
    assert "scanNotActiveBrokerInterval=7000" in store.read_text()

    config, _ = config_of_a_start(workdir, "-c", str(store))
    assert config["scanNotActiveBrokerInterval"] == "7000"

    elsewhere = tmp_path / "missing.conf"
    refused = run_cli("namesrv_grpc", "-c", str(elsewhere), "--config-store-path", str(store), "--port", "0")
    assert refused.returncode == 2
    assert f"{elsewhere}: cannot read" in refused.stderr
