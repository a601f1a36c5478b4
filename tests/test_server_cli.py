"""The ``namesrv`` program as a user runs it: ``-p``, ``-c FILE`` and flag precedence, bad
configuration (exit 2, one line on stderr), signals, ``python -m namesrv_grpc`` and the installed
``namesrv`` script, gRPC health checking, server reflection, S19 and the Prometheus endpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import tomllib
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.cli import parse_boot_line
from tests.support import (
    ROOT,
    NamesrvProcess,
    Stubs,
    free_port,
    register_request,
    run_cli,
    running_namesrv,
    topic,
    wait_serving,
)
from tests.test_security_acl import write_acl

INSTALLED_SCRIPT = Path(sys.executable).with_name("namesrv")
"""The console script ``pip install`` put beside the virtualenv's python."""


def user_env(home: Path) -> dict[str, str]:
    """The environment of a user running the program: HOME points into the test's directory so the
    defaults (~/namesrv/...) never touch the real home."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["HOME"] = str(home)
    return env


def parse_properties_output(stdout: str) -> dict[str, str]:
    result = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        result[key] = value
    return result


@contextmanager
def started(command: list[str], home: Path) -> Iterator[NamesrvProcess]:
    """Start ``command`` (a NameServer that listens on 127.0.0.1 and port 0), wait for its boot line
    and health; stop it with SIGTERM afterwards when still running."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=user_env(home))
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "boot success" not in line:
            process.kill()
            raise AssertionError(f"did not start: {line!r} {process.communicate(timeout=10)[1]}")
        ports = parse_boot_line(line)
        server = NamesrvProcess(process, ports["gRPC"], home, ports["remoting"])
        wait_serving(server.address)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------- -p and -c (S27)


def test_s27_print_config_defaults_and_exit_0(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "namesrv_grpc", "-p"],
        capture_output=True,
        text=True,
        env=user_env(tmp_path),
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    config = parse_properties_output(result.stdout)
    assert config["listenPort"] == "9876", "RocketMQ remoting port"
    assert config["grpcServerPort"] == "8081", "RocketMQ proxy's gRPC port"
    assert config["bindAddress"] == "0.0.0.0"
    assert config["metricsPort"] == "0"
    assert config["scanNotActiveBrokerInterval"] == "5000"  # RocketMQ 5.x NamesrvConfig
    assert config["orderMessageEnable"] == "false"
    assert config["kvConfigPath"] == str(tmp_path / "namesrv" / "kvConfig.json")
    assert config["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "namesrv").exists(), "-p must not create files"


def test_installed_script_and_python_m_print_the_same_config(tmp_path: Path) -> None:
    assert INSTALLED_SCRIPT.exists(), INSTALLED_SCRIPT
    env = user_env(tmp_path)
    by_script = subprocess.run(
        [str(INSTALLED_SCRIPT), "-p", "--port", "1234"], capture_output=True, text=True, env=env, timeout=30
    )
    by_module = subprocess.run(
        [sys.executable, "-m", "namesrv_grpc", "-p", "--port", "1234"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert by_script.returncode == by_module.returncode == 0
    assert by_script.stdout == by_module.stdout
    assert parse_properties_output(by_script.stdout)["grpcServerPort"] == "1234"


def test_help_exits_0() -> None:
    result = run_cli("namesrv_grpc", "--help")
    assert result.returncode == 0
    for flag in ("--host", "--port", "--metrics-port", "--kv-config-path", "--scan-not-active-broker-interval"):
        assert flag in result.stdout
    assert "-c" in result.stdout
    assert "-p" in result.stdout


def test_s27_config_file_applied_and_flags_override(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "# a RocketMQ namesrv.conf\n"
        "listenPort=9999\n"
        f"kvConfigPath={tmp_path / 'from-file' / 'kvConfig.json'}\n"
        "scanNotActiveBrokerInterval = 3000\n"
        "orderMessageEnable: true\n",
        encoding="utf-8",
    )
    from_file = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert from_file.returncode == 0, from_file.stderr
    config = parse_properties_output(from_file.stdout)
    assert config["listenPort"] == "9999"
    assert config["kvConfigPath"] == str(tmp_path / "from-file" / "kvConfig.json")
    assert config["scanNotActiveBrokerInterval"] == "3000"
    assert config["orderMessageEnable"] == "true"

    overridden = run_cli(
        "namesrv_grpc",
        "-c",
        str(conf),
        "-p",
        "--port",
        "1234",
        "--kv-config-path",
        str(tmp_path / "flag.json"),
        "--scan-not-active-broker-interval",
        "500",
    )
    assert overridden.returncode == 0, overridden.stderr
    config = parse_properties_output(overridden.stdout)
    assert config["grpcServerPort"] == "1234", "--port is the gRPC port"
    assert config["listenPort"] == "9999", "the file's remoting port stays"
    assert config["kvConfigPath"] == str(tmp_path / "flag.json")
    assert config["scanNotActiveBrokerInterval"] == "500"
    assert config["orderMessageEnable"] == "true", "a key no flag names keeps the file's value"


def test_s27_config_file_drives_the_running_server(tmp_path: Path) -> None:
    """A server started with only ``-c FILE`` listens, stores KV and orders routes as the file says."""
    kv_path = tmp_path / "store" / "kvConfig.json"
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "listenPort=0\n"
        "grpcServerPort=0\n"
        "bindAddress=127.0.0.1\n"
        f"kvConfigPath={kv_path}\n"
        f"configStorePath={tmp_path / 'store' / 'namesrv.properties'}\n"
        "scanNotActiveBrokerInterval=250\n"
        "orderMessageEnable=true\n",
        encoding="utf-8",
    )
    with started([sys.executable, "-m", "namesrv_grpc", "-c", str(conf)], tmp_path) as server:
        with server.channel() as channel:
            stubs = Stubs(channel)
            config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config)
            assert config["scanNotActiveBrokerInterval"] == "250"
            assert config["orderMessageEnable"] == "true"
            assert config["kvConfigPath"] == str(kv_path)
            stubs.kv.PutKVConfig(
                kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4")
            )
            assert kv_path.exists()
            stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest")]))
            route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest")).route
            assert route.order_topic_conf == "broker-a:4"
        assert server.stop() == 0


def test_unknown_key_in_config_file_is_a_warning_with_allow_unknown_keys(tmp_path: Path) -> None:
    """Without the flag it is refused (tests/test_config_keys.py)."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=9999\nnoSuchRocketMqKey=1\n", encoding="utf-8")
    result = run_cli("namesrv_grpc", "-c", str(conf), "--allow-unknown-keys", "-p")
    assert result.returncode == 0, result.stderr
    assert parse_properties_output(result.stdout)["listenPort"] == "9999"
    assert "noSuchRocketMqKey" in result.stderr
    assert "unknown" in result.stderr.lower()
    assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- bad configuration


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    for text in expected:
        assert text in lines[0], (text, lines[0])


def test_bad_config_non_numeric_listen_port(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("listenPort=abc\n", encoding="utf-8")
    _assert_one_line_error(run_cli("namesrv_grpc", "-c", str(conf)), str(conf), "listenPort", "abc")


def test_bad_config_negative_scan_interval(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("scanNotActiveBrokerInterval=-5\n", encoding="utf-8")
    _assert_one_line_error(run_cli("namesrv_grpc", "-c", str(conf)), str(conf), "scanNotActiveBrokerInterval", "-5")


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_bad_config_unreadable_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "no-such.conf" if kind == "missing" else tmp_path
    _assert_one_line_error(run_cli("namesrv_grpc", "-c", str(path), "-p"), str(path))


def test_bad_config_flag_out_of_range() -> None:
    _assert_one_line_error(
        run_cli("namesrv_grpc", "--scan-not-active-broker-interval", "-5", "-p"), "scanNotActiveBrokerInterval", "-5"
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [('{"configTable": {"ORDER_TOPIC_CONFIG": ', "JSON"), ('{"configTable": ["not", "an", "object"]}', "configTable")],
    ids=["invalid-json", "wrong-shape"],
)
def test_bad_kv_config_file(tmp_path: Path, content: str, problem: str) -> None:
    kv_path = tmp_path / "kvConfig.json"
    kv_path.write_text(content, encoding="utf-8")
    result = run_cli(
        "namesrv_grpc",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--remoting-port",
        "0",
        "--kv-config-path",
        str(kv_path),
        timeout=20,
    )
    _assert_one_line_error(result, str(kv_path), problem)
    assert kv_path.read_text(encoding="utf-8") == content, "the broken file was rewritten"


# --------------------------------------------------------------------------- signals


def test_sigterm_stops_with_exit_0(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns") as server:
        assert server.stop(signal.SIGTERM) == 0
        out, err = server.output()
    assert "stopped" in out
    assert "Traceback" not in err


def test_sigint_stops_installed_script_with_exit_0(tmp_path: Path) -> None:
    command = [
        str(INSTALLED_SCRIPT),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--remoting-port",
        "0",
        "--kv-config-path",
        str(tmp_path / "kvConfig.json"),
    ]
    with started(command, tmp_path) as server:
        with server.channel() as channel:
            Stubs(channel).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=5)
        assert server.stop(signal.SIGINT) == 0
        out, err = server.output()
    assert "stopped" in out
    assert "Traceback" not in err
    assert "KeyboardInterrupt" not in err


def test_health_goes_not_serving_during_shutdown(tmp_path: Path) -> None:
    """A Watch on the overall health sees SERVING, then NOT_SERVING once SIGTERM arrives."""
    with running_namesrv(tmp_path / "ns") as server, server.channel() as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=15)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        server.process.send_signal(signal.SIGTERM)
        statuses = []
        try:
            for response in watch:
                statuses.append(response.status)
                if response.status != health_pb2.HealthCheckResponse.SERVING:
                    break
        except grpc.RpcError:
            pass
        watch.cancel()
        assert statuses, "the watch ended without reporting shutdown"
        assert statuses[-1] == health_pb2.HealthCheckResponse.NOT_SERVING
        assert server.process.wait(15) == 0


# --------------------------------------------------------------------------- standard services


def test_health_serving_for_server_and_each_service(stubs: Stubs) -> None:
    for service in ("", "namesrv.v1.NameServerService", "namesrv.v1.KVConfigService", "namesrv.v1.AdminService"):
        response = stubs.health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert response.status == health_pb2.HealthCheckResponse.SERVING, service
    with pytest.raises(grpc.RpcError) as caught:
        stubs.health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_server_reflection_resolves_services_without_protos(stubs: Stubs) -> None:
    database = ProtoReflectionDescriptorDatabase(stubs.channel)
    services = set(database.get_services())
    assert {
        "namesrv.v1.NameServerService",
        "namesrv.v1.KVConfigService",
        "namesrv.v1.AdminService",
        "grpc.health.v1.Health",
    } <= services
    pool = DescriptorPool(database)
    service = pool.FindServiceByName("namesrv.v1.NameServerService")
    method = service.FindMethodByName("PickupTopicRoute")
    assert method.input_type.full_name == "namesrv.v1.PickupTopicRouteRequest"
    assert method.output_type.full_name == "namesrv.v1.PickupTopicRouteResponse"
    route_field = method.output_type.fields_by_name["route"]
    assert route_field.message_type is not None
    assert route_field.message_type.full_name == "namesrv.v1.TopicRouteData"
    assert {m.name for m in pool.FindServiceByName("namesrv.v1.AdminService").methods} >= {
        "WipeWritePermOfBroker",
        "AddWritePermOfBroker",
        "DeleteTopic",
        "RegisterTopic",
        "GetNamesrvConfig",
        "UpdateNamesrvConfig",
    }

    # Call the method with classes built from the reflected descriptors only.
    stubs.ns.RegisterBroker(register_request(topics=[topic("Reflected", read=3, write=3)]))
    request_class = GetMessageClass(method.input_type)
    response_class = GetMessageClass(method.output_type)
    call: grpc.UnaryUnaryMultiCallable[Any, Any] = stubs.channel.unary_unary(
        "/namesrv.v1.NameServerService/PickupTopicRoute",
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=response_class.FromString,
    )
    response: Any = call(request_class(topic="Reflected"), timeout=5)
    assert [q.broker_name for q in response.route.queue_datas] == ["broker-a"]
    assert response.route.queue_datas[0].read_queue_nums == 3


# --------------------------------------------------------------------------- S19


def _order_route(stubs: Stubs) -> str:
    stubs.kv.PutKVConfig(
        kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4;broker-b:4")
    )
    stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest")]))
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest")).route
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    order_topic_conf: str = route.order_topic_conf
    return order_topic_conf


def test_s19_order_message_enable_route_carries_order_topic_conf(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns", "--order-message-enable") as server, server.channel() as channel:
        assert _order_route(Stubs(channel)) == "broker-a:4;broker-b:4"


def test_s19_without_order_message_enable_order_topic_conf_empty(stubs: Stubs) -> None:
    assert _order_route(stubs) == ""


# --------------------------------------------------------------------------- metrics


def _scrape(url: str, deadline: float) -> str:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                assert response.status == 200
                text: str = response.read().decode("utf-8")
                return text
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _metric_value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_metrics_port_serves_prometheus_metrics(tmp_path: Path) -> None:
    port = free_port()
    with running_namesrv(tmp_path / "ns", "--metrics-port", str(port)) as server, server.channel() as channel:
        url = f"http://127.0.0.1:{port}/metrics"
        text = _scrape(url, time.monotonic() + 10)
        assert _metric_value(text, "namesrv_brokers_live") == 0
        assert "namesrv_build_info{" in text
        stubs = Stubs(channel)
        stubs.ns.RegisterBroker(register_request(topics=[topic("T")]))
        stubs.ns.RegisterBroker(register_request(broker_id=1, broker_addr="127.0.0.1:10921"))
        text = _scrape(url, time.monotonic() + 10)
        assert _metric_value(text, "namesrv_brokers_live") == 2
        config = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config
        assert config["metricsPort"] == str(port)


def test_metrics_off_by_default(stubs: Stubs) -> None:
    config = stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest()).config
    assert config["metricsPort"] == "0"


@pytest.mark.parametrize(
    ("module", "prog"),
    [
        ("namesrv_grpc", "namesrv"),
        ("broker_agent", "broker-agent"),
        ("namesrv_grpc.admin.cli", "namesrv-admin"),
        ("namesrv_grpc.admin.snapshot_cli", "namesrv-snapshot"),
    ],
)
def test_version_prints_the_released_version(module: str, prog: str) -> None:
    """``--version`` of every command prints its name and pyproject.toml's version, and exits 0 (even
    where other flags are required)."""
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = run_cli(module, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{prog} {expected}"


ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
"""ISO-8601 with milliseconds and the UTC offset, as every log line starts (text) or holds (json)."""


def test_log_lines_carry_iso_time_with_zone_and_json_on_request(tmp_path: Path) -> None:
    """``--log-format json``: every stderr line of every process is one JSON object with time
    (ISO-8601 with offset), level, logger and message; the default text lines start with the same
    time. broker-agent takes the same flag."""
    with running_namesrv(tmp_path / "json", "--log-format", "json", "--log-level", "DEBUG") as server:
        server.stop()
    lines = [json.loads(line) for line in server.stderr_path.read_text().splitlines() if line.strip()]
    assert lines, "no log line"
    for line in lines:
        assert set(line) >= {"time", "level", "logger", "message"}, line
        assert re.fullmatch(ISO_TIME, line["time"]), line
    # the children log JSON too (a serving process's debug line at start)
    assert any(line["message"].endswith("frozen out of garbage collection") for line in lines)
    assert any(line["logger"] == "namesrv" and line["level"] == "INFO" for line in lines)
    with running_namesrv(tmp_path / "text") as server:
        server.stop()
    text = server.stderr_path.read_text().splitlines()
    assert text
    assert all(re.match(ISO_TIME + r" (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ", line) for line in text), text
    agent = run_cli(
        "broker_agent", "--log-format", "json", "--broker-config", str(tmp_path / "missing.conf"), timeout=30
    )
    assert agent.returncode == 2
    bad = run_cli("namesrv_grpc", "--log-format", "xml", timeout=30)
    assert bad.returncode == 2
    assert "invalid choice: 'xml'" in bad.stderr


def test_the_supervisor_starts_without_the_modules_only_its_children_use() -> None:
    """``namesrv`` itself (the supervisor) imports neither gRPC, the ACL's YAML nor the route table
    unless a TLS, ACL or audit file is named: they were 45 % of its imports (docs/development.md),
    and ~300 servers start in one run of the suite."""
    code = (
        "import sys, namesrv_grpc.cli\n"
        "heavy = ('grpc', 'yaml', 'namesrv_grpc.core.route_table', 'namesrv_grpc.security.tls')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert imported.stdout.strip() == "[]", imported.stdout + imported.stderr


def test_a_serving_process_reads_yaml_only_for_an_acl_file(tmp_path: Path) -> None:
    """The serving process (a copy per core, restarted by the watchdog) imports PyYAML only when
    ``--acl-file`` names a file to read (``security.acl.load_acl``)."""
    code = (
        "import sys, namesrv_grpc.processes.serving_process\n"
        "print('yaml' in sys.modules)\n"
        "from namesrv_grpc.security.acl import load_acl\n"
        "from pathlib import Path\n"
        "load_acl(Path(sys.argv[1]))\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    acl = write_acl(tmp_path / "acl.yml")
    imported = subprocess.run(
        [sys.executable, "-c", code, str(acl)], capture_output=True, text=True, timeout=60, env=env
    )
    assert imported.stdout.split() == ["False", "True"], imported.stdout + imported.stderr
