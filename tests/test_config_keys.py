"""The three kinds of ``namesrv.conf`` key (issue 28): the keys used here (``KEYS``), the Java
NameServer's Netty keys with no effect here (``JAVA_ONLY_KEYS``: accepted, kept, one INFO line), and
unknown keys (one close to a known key is a typo: refused at start naming it, unless
``--allow-unknown-keys``; one close to none is a warning, as CONTRACT.md has it; every unknown key is
refused by UpdateNamesrvConfig). Over real ``namesrv`` processes, and against what RocketMQ 5.5.0's own
``mqnamesrv -p`` prints."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv_grpc.config import (
    JAVA_ONLY_KEYS,
    KEYS,
    RESTART_KEYS,
    SECURITY_KEYS,
    NamesrvConfig,
    UnknownKeyError,
    apply_properties,
    nearest_key,
)
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import ROCKETMQ_5, java_namesrv_printed_config, require_rocketmq
from tests.support import ROOT, NamesrvProcess, Stubs, run_cli, running_namesrv

JAVA_NAMESRV_CONF = """\
# namesrv.conf of a Java NameServer, as operators tune it
listenPort=9876
rocketmqHome=/opt/rocketmq
serverWorkerThreads=16
serverSelectorThreads=3
serverCallbackExecutorThreads=4
serverSocketSndBufSize=131072
serverSocketRcvBufSize=131072
serverPooledByteBufAllocatorEnable=true
useEpollNativeSelector=true
clientWorkerThreads=4
connectTimeoutMillis=3000
channelNotActiveInterval=60000
clientCloseSocketIfTimeout=true
defaultThreadPoolNums=32
orderMessageEnable=true
"""
JAVA_ONLY_GIVEN = sorted(
    key for key in (line.split("=")[0] for line in JAVA_NAMESRV_CONF.splitlines()) if key in JAVA_ONLY_KEYS
)


def stderr_lines(server: NamesrvProcess, level: str) -> list[str]:
    return [line for line in server.stderr_path.read_text().splitlines() if f" {level} " in line]


def key_warnings(server: NamesrvProcess, conf: Path) -> list[str]:
    """WARNING lines about the configuration file or its keys (not, say, the one about no --acl-file)."""
    return [line for line in stderr_lines(server, "WARNING") if str(conf) in line or "key" in line]


def java_only_line(server: NamesrvProcess) -> str:
    (line,) = [line for line in stderr_lines(server, "INFO") if "with no effect here" in line]
    return line


# ---------------------------------------------------------------------------------- at start


def test_a_java_namesrv_conf_starts_without_a_warning_and_names_its_java_keys_once(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(JAVA_NAMESRV_CONF)
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server, server.channel() as channel:
        config = dict(Stubs(channel).admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=5).config)
        assert config["serverWorkerThreads"] == "16"  # kept as given
        assert config["orderMessageEnable"] == "true"  # the keys used here still work
        assert config["defaultThreadPoolNums"] == "32"
    assert key_warnings(server, conf) == []
    line = java_only_line(server)
    assert line.endswith(": " + ", ".join(JAVA_ONLY_GIVEN)), line
    assert "NettyClientConfig and NettyServerConfig" in line


def test_a_typo_is_refused_naming_the_key_it_meant(tmp_path: Path) -> None:
    """Issue 28: ``listenPrt=1`` was warned about and the server bound 0.0.0.0:9876."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPrt=1\nserverWorkerThreads=16\n")
    refused = run_cli("namesrv_grpc", "-c", str(conf), "--port", "0", "--remoting-port", "0")
    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""  # never served
    lines = refused.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"namesrv: {conf}: listenPrt: unknown key (did you mean listenPort?)")
    assert "--allow-unknown-keys" in lines[0]


def test_several_typos_are_named_in_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("scanNotActiveBrokerIntervall=1000\nlistenPrt=1\n")
    refused = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert "scanNotActiveBrokerIntervall: did you mean scanNotActiveBrokerInterval?" in line
    assert "listenPrt: did you mean listenPort?" in line


def test_an_unknown_key_close_to_no_known_key_is_a_warning_not_fatal(tmp_path: Path) -> None:
    """CONTRACT.md: unknown keys in -c FILE are warned about, not fatal (a key of another program's
    configuration, kept in a shared file); only a likely typo of one of ours stops the start."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("noSuchThing=1\nscanNotActiveBrokerInterval=1000\n")
    printed = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert printed.returncode == 0, printed.stderr
    assert "scanNotActiveBrokerInterval=1000" in printed.stdout.splitlines()
    (warning,) = [line for line in printed.stderr.splitlines() if "noSuchThing" in line]
    assert "noSuchThing: unknown key (no known key is close), ignored" in warning


def test_allow_unknown_keys_starts_with_one_warning_per_unknown_key(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPrt=1\nscanNotActiveBrokerInterval=1000\n")
    with running_namesrv(tmp_path / "ns", "-c", str(conf), "--allow-unknown-keys") as server:
        with server.channel() as channel:
            request = admin_pb2.GetNamesrvConfigRequest()
            config = dict(Stubs(channel).admin.GetNamesrvConfig(request, timeout=5).config)
        assert config["scanNotActiveBrokerInterval"] == "1000"
        assert "listenPrt" not in config
    (warning,) = key_warnings(server, conf)
    assert warning.endswith(f"{conf}: listenPrt: unknown key (did you mean listenPort?), ignored")


def test_a_bad_value_of_a_java_key_is_refused_like_any_other(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("serverWorkerThreads=eight\n")
    refused = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"namesrv: {conf}: serverWorkerThreads: must be a whole number")


def test_java_keys_are_printed_by_p_as_given(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("serverSocketBacklog=2048\nuseTLS=TRUE\n")
    printed = run_cli("namesrv_grpc", "-c", str(conf), "-p")
    assert printed.returncode == 0, printed.stderr
    assert "serverSocketBacklog=2048" in printed.stdout.splitlines()
    assert "useTLS=true" in printed.stdout.splitlines()
    assert "serverWorkerThreads" not in printed.stdout  # only what was given


def test_what_rocketmq_5_prints_with_p_starts_this_namesrv(tmp_path: Path) -> None:
    """Every key RocketMQ 5.5.0's ``mqnamesrv -p`` prints (all of NamesrvConfig, NettyServerConfig and
    NettyClientConfig, with Java's defaults) as a namesrv.conf: no warning, every Java-only key in the
    INFO line, and no key of Java's is unknown here."""
    require_rocketmq(ROCKETMQ_5)
    printed = java_namesrv_printed_config(ROCKETMQ_5, tmp_path / "java")
    assert "serverWorkerThreads" in printed
    assert set(printed) <= set(KEYS) | set(JAVA_ONLY_KEYS), sorted(set(printed) - set(KEYS) - set(JAVA_ONLY_KEYS))
    conf = tmp_path / "namesrv.conf"
    conf.write_text("".join(f"{key}={value}\n" for key, value in printed.items()))
    with running_namesrv(tmp_path / "ns", "-c", str(conf)) as server, server.channel() as channel:
        config = dict(Stubs(channel).admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=5).config)
        assert config["writeBufferHighWaterMark"] == "65536"  # Java's 0: Netty's default
        assert config["serverSelectorThreads"] == printed["serverSelectorThreads"]
    assert key_warnings(server, conf) == []
    named = java_only_line(server).rsplit(": ", 1)[1].split(", ")
    assert named == sorted(set(printed) & set(JAVA_ONLY_KEYS))


# ------------------------------------------------------------------------- at run time


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    with running_namesrv(tmp_path_factory.mktemp("config-keys")) as process:
        yield process


def test_update_accepts_java_keys_keeps_them_and_refuses_typos_on_both_doors(server: NamesrvProcess) -> None:
    """As Java's ``Configuration.update`` takes the keys of its config objects: stored, shown and
    persisted (no effect here); an unknown key is refused (Java ignores it silently), naming the
    nearest key."""
    with RemotingTestClient(server.remoting_address) as client:
        answer = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"serverWorkerThreads=16\n")
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        typo = client.call(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"listenPrt=1\n")
        assert typo.code == ResponseCode.SYSTEM_ERROR
        assert "did you mean listenPort?" in (typo.remark or "")
        got = client.call(RequestCode.GET_NAMESRV_CONFIG)
        assert "serverWorkerThreads=16\n" in got.body.decode()
    with server.channel() as channel:
        stubs = Stubs(channel)
        stubs.admin.UpdateNamesrvConfig(
            admin_pb2.UpdateNamesrvConfigRequest(config={"clientWorkerThreads": "2"}), timeout=5
        )
        with pytest.raises(grpc.RpcError) as refused:
            stubs.admin.UpdateNamesrvConfig(
                admin_pb2.UpdateNamesrvConfigRequest(config={"serverWorkerThread": "2"}), timeout=5
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "did you mean serverWorkerThreads?" in (refused.value.details() or "")
        config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=5).config)
    assert config["clientWorkerThreads"] == "2"
    assert config["serverWorkerThreads"] == "16"
    stored = read_properties(server.workdir / "namesrv.properties")
    assert stored["serverWorkerThreads"] == "16"
    assert stored["clientWorkerThreads"] == "2"
    assert "listenPrt" not in stored
    assert "listenPrt" not in bodies.decode_namesrv_config(got.body)


# --------------------------------------------------------------------------------- units


def test_nearest_key() -> None:
    assert nearest_key("listenPrt") == "listenPort"
    assert nearest_key("LISTENPORT") == "listenPort"
    assert nearest_key("serverWorkerThread") == "serverWorkerThreads"
    assert nearest_key("zzzzzz") is None


def test_unknown_keys_are_a_warning_only_when_not_strict() -> None:
    with pytest.raises(UnknownKeyError) as refused:
        apply_properties(NamesrvConfig(), {"listenPrt": "1", "listenPort": "1"}, "namesrv.conf", strict=True)
    assert refused.value.keys == ["listenPrt"]
    assert str(refused.value).startswith("namesrv.conf: listenPrt: unknown key (did you mean listenPort?)")
    config, warnings = apply_properties(NamesrvConfig(), {"listenPrt": "1"}, "namesrv.conf", strict=False)
    assert config == NamesrvConfig()
    assert warnings == ["namesrv.conf: listenPrt: unknown key (did you mean listenPort?), ignored"]
    with pytest.raises(UnknownKeyError) as typo:
        apply_properties(NamesrvConfig(), {"listenPrt": "1", "zzzzzz": "1"}, "namesrv.conf", strict="typos")
    assert typo.value.keys == ["listenPrt"]
    config, warnings = apply_properties(NamesrvConfig(), {"zzzzzz": "1"}, "namesrv.conf", strict="typos")
    assert config == NamesrvConfig()
    assert warnings == ["namesrv.conf: zzzzzz: unknown key (no known key is close), ignored"]


@pytest.mark.parametrize(
    ("key", "text", "kept"),
    [
        ("serverWorkerThreads", " 16 ", "16"),
        ("serverWorkerThreads", "-1", "-1"),  # Java's Integer.parseInt takes it
        ("channelNotActiveInterval", "9223372036854775807", "9223372036854775807"),
        ("useTLS", "True", "true"),
        ("socksProxyConfig", '{"0.0.0.0/0":{"addr":"127.0.0.1:1080"}}', '{"0.0.0.0/0":{"addr":"127.0.0.1:1080"}}'),
    ],
)
def test_java_keys_are_checked_as_java_reads_them(key: str, text: str, kept: str) -> None:
    config, warnings = apply_properties(NamesrvConfig(), {key: text}, "namesrv.conf", strict=True)
    assert warnings == []
    assert config.java_only == {key: kept}
    assert config.to_properties()[key] == kept
    assert NamesrvConfig().java_only == {}  # never shared between configs


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("serverWorkerThreads", "2147483648"),
        ("serverWorkerThreads", "1_000"),
        ("channelNotActiveInterval", "1.5"),
        ("useTLS", "yes"),
    ],
)
def test_bad_values_of_java_keys_are_refused(key: str, text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        apply_properties(NamesrvConfig(), {key: text}, "namesrv.conf", strict=False)
    assert refused.value.key == key


def test_java_water_marks_of_zero_mean_nettys_defaults() -> None:
    config, _ = apply_properties(
        NamesrvConfig(), {"writeBufferHighWaterMark": "0", "writeBufferLowWaterMark": "0"}, "f", strict=True
    )
    assert (config.write_buffer_high_water_mark, config.write_buffer_low_water_mark) == (65536, 32768)
    with pytest.raises(ConfigError, match="or 0: Netty's default"):
        apply_properties(NamesrvConfig(), {"writeBufferHighWaterMark": "10"}, "f", strict=True)


def test_java_only_keys_are_neither_used_keys_nor_documented_elsewhere() -> None:
    assert not set(JAVA_ONLY_KEYS) & set(KEYS)


def test_every_field_is_a_key_declared_on_it_once() -> None:
    """Each NamesrvConfig field but ``java_only`` carries its key (``key_field``), and KEYS is read
    from them: one key per field, named as the field in camelCase (``tls.*`` keys aside)."""
    fields = [item.name for item in dataclasses.fields(NamesrvConfig) if item.name != "java_only"]
    assert sorted(spec.attribute for spec in KEYS.values()) == sorted(fields)
    for name, spec in KEYS.items():
        assert spec.name == name
        if not name.startswith("tls."):
            assert re.sub(r"([A-Z])", r"_\1", name).lower() == spec.attribute, name
    assert {"listenPort", "grpcServerPort", "remotingAcceptsPerTurn"} <= RESTART_KEYS
    assert {"tls.server.mode", "aclFile", "healthPort"} <= SECURITY_KEYS


def test_docs_list_exactly_the_java_only_keys() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text[text.index("### Keys of the Java NameServer with no effect here") :]
    section = section[: section.index("\n## ")]
    documented: dict[str, str] = {}
    for row in re.findall(r"^\| (`.*)$", section, re.MULTILINE):
        keys_cell, class_cell = row.split(" | ")[:2]
        for key in re.findall(r"`([^`]*)`", keys_cell):
            documented[key] = class_cell.strip("`")
    assert documented == {key: spec.java_class for key, spec in JAVA_ONLY_KEYS.items()}
