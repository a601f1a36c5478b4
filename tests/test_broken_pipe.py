"""No traceback, ever, on a closed stdout pipe (``namesrv -p | head``, ``broker-agent ... | head``).

Each program gets a pipe whose reading end is already closed, so its first write fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from tests.support import ROOT, NamesrvProcess, Stubs, fixture_path


@contextmanager
def closed_pipe() -> Iterator[int]:
    """The writing end of a pipe nobody reads."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        yield write_end
    finally:
        os.close(write_end)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_namesrv_print_config_into_closed_pipe() -> None:
    with closed_pipe() as stdout:
        result = subprocess.run(
            [sys.executable, "-m", "namesrv_grpc", "-p"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
            timeout=60,
        )
    assert result.stderr == ""
    assert result.returncode == 141


def test_broker_agent_keeps_running_with_closed_stdout(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    """The agent's start line cannot be written: it goes on registering, stops cleanly on SIGTERM."""
    with closed_pipe() as stdout:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "broker_agent",
                "--broker-config",
                str(fixture_path("broker-a.properties")),
                "--topics-json",
                str(fixture_path("topics-quickstart.json")),
                "--namesrv-addr",
                namesrv.address,
                "--set",
                "brokerIP1=127.0.0.1",
            ],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and agent.poll() is None:
            info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
            if "broker-a" in info.broker_addr_table:
                break
            time.sleep(0.05)
        assert agent.poll() is None, agent.communicate(timeout=10)[1]
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate(timeout=10)
    assert agent.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "BrokenPipe" not in stderr
