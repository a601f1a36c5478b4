"""``make demo`` (scripts/demo.py) end to end: a real NameServer, three broker agents from examples/,
a broker registering over remoting as a Java 5.x broker does, routes on both doors (issue 28: the
demo had failed since S42 without any test noticing)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import ModuleType

import pytest

from tests.support import ROOT

DEMO = ROOT / "scripts" / "demo.py"


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("namesrv_demo", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_demo_runs_to_the_end() -> None:
    """What ``make demo`` runs, as it runs it: exit 0, java-topic of the remoting broker on both doors,
    the last route on both doors, every process stopped cleanly."""
    ran = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=180,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    assert "demo failed" not in ran.stderr
    assert "Task exception was never retrieved" not in ran.stderr
    assert "broker-c registered 15 topics" in out
    java_topic = out[out.index("Route of java-topic:") :]
    assert "broker-c (DefaultCluster): master 127.0.0.1:10941" in java_topic
    assert '"brokerAddrs":{"0":"127.0.0.1:10941"},"brokerName":"broker-c"' in java_topic
    assert "java-topic has no route any more." in out
    after_slave = out[out.index("Stopping the broker-a slave") :]
    assert "broker-a (DefaultCluster): master 127.0.0.1:10911\n" in after_slave  # gRPC, without the slave
    assert '"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a"' in after_slave  # remoting
    assert out.rstrip().endswith("Demo finished: every process stopped cleanly.")


def test_the_remoting_broker_registers_a_java_brokers_system_topics() -> None:
    topics = load_demo().java_broker_topics("DefaultCluster", "broker-c")
    for name in (
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRACE_TOPIC",
        "DefaultCluster",
        "broker-c",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_REVIVE_LOG_DefaultCluster",
    ):
        assert name in topics
    assert topics["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18
    assert topics["TBW102"].perm == 7


def test_a_failing_demo_says_why_once(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """broker-c registering one topic and nothing else (the demo before issue 28) is refused by S42:
    the demo says so in one line and leaves no asyncio task behind."""
    demo = load_demo()
    monkeypatch.setattr(demo, "java_broker_topics", lambda cluster, broker: {})
    assert demo.main() == 1
    err = capfd.readouterr().err
    failures = [line for line in err.splitlines() if line.startswith("demo failed:")]
    assert failures == ["demo failed: REGISTER_BROKER of broker-c over remoting: code 1 register broker failed"]
    assert "Task exception was never retrieved" not in err
    assert "Traceback" not in err


def test_a_failure_without_a_message_is_named_by_its_type() -> None:
    reason = load_demo().reason
    assert reason(TimeoutError()) == "TimeoutError (no message)"
    assert reason(RuntimeError("no route")) == "no route"
