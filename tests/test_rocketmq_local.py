"""docs/rocketmq-local.md, step by step: scripts/rocketmq.sh runs a real 5.5.0 broker (with the page's
broker.conf, ports and paths changed to free ones), mqadmin and mqadmin's producer against our
NameServer."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.rocketmq_support import (
    NO_SERVER_TLS,
    ROCKETMQ_5,
    SMALL_JVM_FLAGS,
    free_port_block,
    require_rocketmq,
    wait_registered,
    wait_unregistered,
)
from tests.support import ROOT, running_namesrv

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "scripts" / "rocketmq.sh"
PAGE = ROOT / "docs" / "rocketmq-local.md"


def page_broker_conf(namesrv: str, port: int, store: Path) -> str:
    """The page's broker.conf with this test's NameServer, port and store."""
    (block,) = re.findall(r"```properties\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    replaced = {"namesrvAddr": namesrv, "listenPort": str(port), "storePathRootDir": str(store)}
    replaced["storePathCommitLog"] = str(store / "commitlog")
    lines = []
    for line in block.splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={replaced[key]}" if key in replaced else line)
    return "\n".join(lines) + "\n"


def rocketmq(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=java_env(home))
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def java_env(home: Path) -> dict[str, str]:
    """The page's commands' environment, with ``JAVA_OPTS`` (the page's knob for extra flags) set as
    for the suite's other JVMs: the C1 compiler only and one GC thread, and no TLS on the broker's
    server ports (RocketMQ's default makes a 2048-bit RSA key at start: ~4.5 s of CPU;
    tests/rocketmq_support.py ``NO_SERVER_TLS``). The page's own commands are run as it shows them."""
    flags = [*SMALL_JVM_FLAGS, *(f"-D{key}={value}" for key, value in NO_SERVER_TLS.items())]
    return {**os.environ, "ROCKETMQ_HOME": str(home), "HOME": str(home), "JAVA_OPTS": " ".join(flags)}


def test_the_page_runs_a_broker_mqadmin_and_a_producer_against_our_namesrv(tmp_path: Path) -> None:
    require_rocketmq(ROCKETMQ_5)
    with running_namesrv(tmp_path / "ns") as ours:
        addr = ours.remoting_address
        port = free_port_block(4) + 2
        conf = tmp_path / "broker.conf"
        conf.write_text(page_broker_conf(addr, port, tmp_path / "store"), encoding="utf-8")
        log = (tmp_path / "broker.log").open("w")
        broker = subprocess.Popen(
            ["bash", str(SCRIPT), "broker", "-c", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=java_env(tmp_path / "home"),
            start_new_session=True,
        )
        try:
            wait_registered(addr, "broker-a", timeout=90)
            home = tmp_path / "home"
            assert f"127.0.0.1:{port}" in rocketmq("mqadmin", "clusterList", "-n", addr, home=home).stdout
            rocketmq("mqadmin", "updateTopic", "-n", addr, "-c", "DefaultCluster", "-t", "LocalTopic", home=home)
            route = rocketmq("mqadmin", "topicRoute", "-n", addr, "-t", "LocalTopic", home=home).stdout
            assert f"127.0.0.1:{port}" in route
            sent = rocketmq("mqadmin", "sendMessage", "-n", addr, "-t", "LocalTopic", "-p", "hello", home=home)
            assert "SEND_OK" in sent.stdout, sent.stdout
            status = rocketmq("mqadmin", "topicStatus", "-n", addr, "-t", "LocalTopic", home=home).stdout
            # "#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated", one row per queue
            max_offsets = [int(row.split()[3]) for row in status.splitlines() if row.startswith("broker-a")]
            assert sum(max_offsets) == 1, status
        finally:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(60)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait(10)
            log.close()
        wait_unregistered(addr, "broker-a", timeout=10)
