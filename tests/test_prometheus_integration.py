"""A real Prometheus (Debian's ``prometheus`` binary) on 127.0.0.1 scrapes a real NameServer and two
real broker agents every second, with deploy/prometheus/alerts.yml loaded; its HTTP API then reports
the live-broker count the NameServer has, and the dashboard's lookup panels draw the route lookups
of a RocketMQ (remoting) client. The test's Prometheus has its own config, port and storage
directory; it never uses a system Prometheus."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from tests.metrics_support import free_port, require_binary
from tests.remoting_support import RemotingTestClient
from tests.support import ROOT, NamesrvProcess, fixture_path, running_namesrv, spawn_agent
from tests.test_deploy import ALERTS, GRAFANA_VARIABLES, dashboard_exprs

BROKERS = (("broker-a.properties", "10911"), ("broker-b.properties", "10931"))
"""The example brokers the agents register (broker.conf, listenPort)."""


def api(base: str, path: str, **params: str) -> Any:
    """GET a Prometheus HTTP API path; return its ``data``."""
    url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
    with urllib.request.urlopen(url, timeout=5) as response:
        document = json.loads(response.read().decode("utf-8"))
    assert document["status"] == "success", document
    return document["data"]


def query(base: str, promql: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = api(base, "/api/v1/query", query=promql)["result"]
    return result


def poll(check: Any, timeout: float, what: str) -> Any:
    """Call ``check`` every 0.25 s until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, urllib.error.URLError) as exc:  # Prometheus still starting
            last = exc
        else:
            if last:
                return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


@contextmanager
def running_prometheus(workdir: Path, namesrv_targets: list[str], agent_targets: list[str]) -> Iterator[str]:
    """Our own Prometheus on a free loopback port, scraping every second; yields its base URL."""
    workdir.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "prometheus" / "alerts.yml", workdir / "alerts.yml")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["alerts.yml"],
        "scrape_configs": [
            {"job_name": "namesrv", "static_configs": [{"targets": namesrv_targets}]},
            {"job_name": "broker-agent", "static_configs": [{"targets": agent_targets}]},
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(
        [
            require_binary("prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "prometheus.log").open("w"),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def test_prometheus_reports_live_brokers_of_a_real_namesrv(tmp_path: Path) -> None:
    require_binary("prometheus")
    ns_metrics = free_port()
    agent_ports = [free_port() for _ in BROKERS]
    with ExitStack() as stack:
        namesrv: NamesrvProcess = stack.enter_context(
            running_namesrv(tmp_path / "namesrv", "--metrics-port", str(ns_metrics))
        )
        for (conf, listen_port), metrics_port in zip(BROKERS, agent_ports, strict=True):
            agent = spawn_agent(
                "--broker-config", str(fixture_path(conf)),
                "--topics-json", str(fixture_path("topics-quickstart.json")),
                "--namesrv-addr", namesrv.address,
                "--set", "brokerIP1=127.0.0.1", "--set", f"listenPort={listen_port}",
                "--metrics-port", str(metrics_port),
            )  # fmt: skip
            stack.callback(_stop_agent, agent)
        base = stack.enter_context(
            running_prometheus(
                tmp_path / "prometheus",
                [f"127.0.0.1:{ns_metrics}"],
                [f"127.0.0.1:{port}" for port in agent_ports],
            )
        )

        def live_brokers() -> float | None:
            result = query(base, 'namesrv_brokers_live{job="namesrv"}')
            return float(result[0]["value"][1]) if result and float(result[0]["value"][1]) == len(BROKERS) else None

        assert poll(live_brokers, 30, f"namesrv_brokers_live == {len(BROKERS)} in Prometheus") == len(BROKERS)

        def all_up() -> bool:
            up = {r["metric"]["instance"]: r["value"][1] for r in query(base, "up")}
            return len(up) == 1 + len(BROKERS) and set(up.values()) == {"1"}

        poll(all_up, 15, "the NameServer and both agents to be up")
        registered = query(base, 'sum(broker_agent_registrations_total{job="broker-agent", result="ok"})')
        assert float(registered[0]["value"][1]) >= len(BROKERS)
        disagree = query(base, "max by (job) (namesrv_brokers_live) != min by (job) (namesrv_brokers_live)")
        assert disagree == []
        rules = api(base, "/api/v1/rules")["groups"]
        loaded = {rule["name"] for group in rules for rule in group["rules"]}
        assert loaded == ALERTS
        assert rules[0]["rules"][0]["health"] in {"ok", "unknown"}

        # A RocketMQ client's lookups (remoting GET_ROUTEINFO_BY_TOPIC) show on the dashboard's panels.
        panels = dashboard_exprs()
        for variable, value in GRAFANA_VARIABLES.items():
            panels = {where: expr.replace(variable, value) for where, expr in panels.items()}
        client = stack.enter_context(RemotingTestClient(namesrv.remoting_address))

        def drawn(where: str, label: str, value: str) -> list[dict[str, Any]]:
            for _ in range(20):
                answer = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
                assert answer.code == ResponseCode.SUCCESS
            return [
                r for r in query(base, panels[where]) if r["metric"].get(label) == value and float(r["value"][1]) > 0
            ]

        poll(lambda: drawn("Route lookups/s/A", "protocol", "remoting"), 30, "remoting lookups/s on the dashboard")
        poll(
            lambda: drawn("Route lookup p99/A", "protocol", "remoting"), 30, "the remoting lookup p99 on the dashboard"
        )
        poll(
            lambda: drawn("Remoting request p99 by code/A", "request_code", "GET_ROUTEINFO_BY_TOPIC"),
            30,
            "GET_ROUTEINFO_BY_TOPIC on the remoting request p99 panel",
        )


def _stop_agent(agent: subprocess.Popen[str]) -> None:
    if agent.poll() is None:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(20)
        except subprocess.TimeoutExpired:
            agent.kill()
    for stream in (agent.stdout, agent.stderr):
        if stream is not None:
            stream.close()
