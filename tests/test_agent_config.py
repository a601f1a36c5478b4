"""broker.conf as the broker agent reads it (S37): the real sample files of Apache RocketMQ, RocketMQ's
defaults, the odd ways operators format Java properties, and the errors for configs the agent refuses
(each a ConfigError naming the file and the key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.config import BrokerConfig, load_broker_config, parse_namesrv_addr
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from tests.support import fixture_path, run_cli

NO_ENV: dict[str, str] = {}


def load_file(path: Path, *, override: str | None = "127.0.0.1:9876", env: dict[str, str] = NO_ENV) -> BrokerConfig:
    return load_broker_config(read_properties(path), str(path), namesrv_addr_override=override, environ=env)


def load_text(tmp_path: Path, data: bytes, **kwargs: object) -> BrokerConfig:
    path = tmp_path / "broker.conf"
    path.write_bytes(data)
    return load_file(path, **kwargs)  # type: ignore[arg-type]


def load_props(props: dict[str, str], env: dict[str, str] = NO_ENV) -> BrokerConfig:
    return load_broker_config(props, "test.conf", environ=env)


# --- the real sample files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cluster", "broker_name", "broker_id", "role"),
    [
        ("broker-a.properties", "DefaultCluster", "broker-a", 0, "SYNC_MASTER"),
        ("broker-a-s.properties", "DefaultCluster", "broker-a", 1, "SLAVE"),
        ("broker-b.properties", "DefaultCluster", "broker-b", 0, "SYNC_MASTER"),
        ("broker.conf", "DefaultCluster", "broker-a", 0, "ASYNC_MASTER"),
    ],
)
def test_s37_real_fixture_identity(name: str, cluster: str, broker_name: str, broker_id: int, role: str):
    config = load_file(fixture_path(name))
    assert config.broker_cluster_name == cluster
    assert config.broker_name == broker_name
    assert config.broker_id == broker_id
    assert config.broker_role == role
    assert config.namesrv_addrs == ("127.0.0.1:9876",)


def test_s37_real_fixture_raw_properties_are_read_as_written():
    """broker.conf is written ``key = value``; the other samples ``key=value``."""
    spaced = read_properties(fixture_path("broker.conf"))
    assert spaced["brokerClusterName"] == "DefaultCluster"
    assert spaced["brokerRole"] == "ASYNC_MASTER"
    assert spaced["deleteWhen"] == "04"
    slave = read_properties(fixture_path("broker-a-s.properties"))
    assert slave["brokerId"] == "1"
    assert slave["flushDiskType"] == "ASYNC_FLUSH"


def test_s37_defaults():
    config = load_file(fixture_path("broker-a.properties"))
    assert config.listen_port == 10911
    assert config.ha_listen_port == 10912
    assert config.register_name_server_period == 30_000
    assert config.force_register is True
    assert config.compressed_register is False
    assert config.register_broker_timeout_mills == 24_000
    assert config.broker_permission == 6
    assert config.auto_create_topic_enable is True
    assert config.default_topic_queue_nums == 8


def test_s37_ha_listen_port_follows_listen_port():
    config = load_props({"brokerRole": "SLAVE", "brokerId": "1", "listenPort": "10921", "namesrvAddr": "h:1"})
    assert (config.listen_port, config.ha_listen_port) == (10921, 10922)
    explicit = load_props({"listenPort": "10921", "haListenPort": "20000", "namesrvAddr": "h:1"})
    assert explicit.ha_listen_port == 20000


def test_s37_addresses_use_broker_ip1_and_ip2():
    config = load_props({"brokerIP1": "10.0.0.5", "listenPort": "10911", "namesrvAddr": "h:1"})
    assert config.broker_addr == "10.0.0.5:10911"
    assert config.ha_server_addr == "10.0.0.5:10912"  # brokerIP2 defaults to brokerIP1
    both = load_props({"brokerIP1": "10.0.0.5", "brokerIP2": "10.0.1.5", "namesrvAddr": "h:1"})
    assert both.ha_server_addr == "10.0.1.5:10912"


def test_s37_settings_are_read():
    config = load_props(
        {
            "namesrvAddr": "h:1",
            "registerNameServerPeriod": "5000",
            "forceRegister": "false",
            "compressedRegister": "TRUE",
            "registerBrokerTimeoutMills": "1000",
            "brokerPermission": "4",
        }
    )
    assert config.register_name_server_period == 5000
    assert config.force_register is False
    assert config.compressed_register is True
    assert config.register_broker_timeout_mills == 1000
    assert config.broker_permission == 4


# --- formatting --------------------------------------------------------------------------------


def test_s37_separators_and_comments(tmp_path: Path):
    config = load_text(
        tmp_path,
        b"# comment\n! bang comment\nbrokerClusterName = ClusterX\nbrokerName:broker-x\n"
        b"brokerId 0\n!brokerName=commented-out\nlistenPort =  10931\n",
    )
    assert config.broker_cluster_name == "ClusterX"
    assert config.broker_name == "broker-x"
    assert config.broker_id == 0
    assert config.listen_port == 10931


def test_s37_crlf_line_endings(tmp_path: Path):
    config = load_text(tmp_path, b"brokerClusterName=C1\r\nbrokerName=b1\r\nbrokerId=2\r\nbrokerRole=SLAVE\r\n")
    assert (config.broker_cluster_name, config.broker_name, config.broker_id) == ("C1", "b1", 2)
    assert config.broker_role == "SLAVE"


def test_s37_utf8_bom(tmp_path: Path):
    config = load_text(tmp_path, b"\xef\xbb\xbfbrokerName=bom-broker\nlistenPort=10921\n")
    assert config.broker_name == "bom-broker"
    assert config.listen_port == 10921


def test_s37_trailing_spaces(tmp_path: Path):
    config = load_text(tmp_path, b"brokerName=b1   \nbrokerId=0 \t\nforceRegister=false  \nlistenPort=10911 \n")
    assert config.broker_name == "b1"
    assert config.force_register is False
    assert config.listen_port == 10911


def test_s37_line_continuation(tmp_path: Path):
    config = load_text(
        tmp_path,
        b"brokerName=broker-\\\n    cont\nnamesrvAddr=127.0.0.1:9876;\\\n    127.0.0.1:9877\n",
        override=None,
    )
    assert config.broker_name == "broker-cont"
    assert config.namesrv_addrs == ("127.0.0.1:9876", "127.0.0.1:9877")


# --- roles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
def test_s37_master_role_forces_id_0(role: str):
    config = load_props({"brokerRole": role, "brokerId": "3", "namesrvAddr": "h:1"})
    assert config.broker_id == 0


def test_s37_slave_with_id_0_is_an_error():
    with pytest.raises(ConfigError) as info:
        load_props({"brokerRole": "SLAVE", "brokerId": "0", "namesrvAddr": "h:1"})
    assert info.value.key == "brokerId"
    assert "test.conf" in str(info.value)


def test_s37_slave_without_id_is_an_error():
    with pytest.raises(ConfigError) as info:
        load_props({"brokerRole": "SLAVE", "namesrvAddr": "h:1"})
    assert info.value.key == "brokerId"


def test_s37_unknown_role_is_an_error():
    with pytest.raises(ConfigError) as info:
        load_props({"brokerRole": "LEADER", "namesrvAddr": "h:1"})
    assert info.value.key == "brokerRole"


# --- namesrvAddr -------------------------------------------------------------------------------


def test_s37_parse_namesrv_addr_trailing_semicolon():
    assert parse_namesrv_addr("a:1;b:2;", "f") == ("a:1", "b:2")


def test_s37_parse_namesrv_addr_spaces_and_duplicates():
    assert parse_namesrv_addr(" a:1 ; b:2 ;; a:1 ;", "f") == ("a:1", "b:2")
    assert parse_namesrv_addr("[::1]:9876", "f") == ("[::1]:9876",)


@pytest.mark.parametrize("text", ["", ";", " ; ; "])
def test_s37_parse_namesrv_addr_empty_is_an_error(text: str):
    with pytest.raises(ConfigError) as info:
        parse_namesrv_addr(text, "f.conf")
    assert info.value.key == "namesrvAddr"
    assert info.value.source == "f.conf"


def test_commas_between_namesrv_addresses_are_named(tmp_path: Path) -> None:
    """Issue 28: ``a:9876,b:9876`` used to be blamed on IPv6 brackets."""
    with pytest.raises(ConfigError) as info:
        parse_namesrv_addr("10.0.0.1:8081,10.0.0.2:8081", "broker.conf", "grpcNamesrvAddr")
    assert str(info.value) == (
        "broker.conf: grpcNamesrvAddr: separate NameServer addresses with ';', not ',': '10.0.0.1:8081;10.0.0.2:8081'"
    )
    assert "IPv6" not in str(info.value)
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nnamesrvAddr=127.0.0.1:9876\n")
    flag = run_cli("broker_agent", "--broker-config", str(conf), "--namesrv-addr", "127.0.0.1:8081, 127.0.0.2:8081")
    assert flag.returncode == 2
    assert "--namesrv-addr: namesrvAddr: separate NameServer addresses with ';', not ','" in flag.stderr


def test_s37_namesrv_addr_precedence_flag_over_file_over_env():
    props = {"namesrvAddr": "file:1"}
    env = {"NAMESRV_ADDR": "env:1;env:2"}
    assert load_broker_config(props, "f", namesrv_addr_override="flag:1", environ=env).namesrv_addrs == ("flag:1",)
    assert load_broker_config(props, "f", environ=env).namesrv_addrs == ("file:1",)
    assert load_broker_config({}, "f", environ=env).namesrv_addrs == ("env:1", "env:2")


def test_s37_bad_override_is_reported_against_the_flag():
    with pytest.raises(ConfigError) as info:
        load_broker_config({"namesrvAddr": "file:1"}, "f", namesrv_addr_override="nope", environ={})
    assert info.value.key == "namesrvAddr"
    assert info.value.source == "--namesrv-addr"


# --- errors --------------------------------------------------------------------------------------


def error_of(props: dict[str, str], env: dict[str, str] = NO_ENV) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_broker_config(props, "/etc/rocketmq/broker.conf", environ=env)
    message = str(info.value)
    assert message.startswith("/etc/rocketmq/broker.conf: "), message
    assert "\n" not in message
    return info.value


def test_s37_unresolved_placeholder():
    error = error_of({"brokerId": "${brokerId}", "namesrvAddr": "h:1"})
    assert error.key == "brokerId"
    assert "${brokerId}" in str(error)


def test_s37_unresolved_placeholder_in_name():
    error = error_of({"brokerName": "${BROKER_NAME}", "namesrvAddr": "h:1"})
    assert error.key == "brokerName"


def test_s37_non_numeric_broker_id():
    error = error_of({"brokerId": "abc", "namesrvAddr": "h:1"})
    assert error.key == "brokerId"
    assert "abc" in str(error)


def test_s37_namesrv_addr_without_port():
    error = error_of({"namesrvAddr": "127.0.0.1"})
    assert error.key == "namesrvAddr"
    assert "127.0.0.1" in str(error)


@pytest.mark.parametrize("addr", ["127.0.0.1:65536", "127.0.0.1:0", "a:1;127.0.0.1:99999"])
def test_s37_namesrv_addr_port_out_of_range(addr: str):
    assert error_of({"namesrvAddr": addr}).key == "namesrvAddr"


@pytest.mark.parametrize(("key", "value"), [("listenPort", "70000"), ("listenPort", "0"), ("haListenPort", "-1")])
def test_s37_listen_port_out_of_range(key: str, value: str):
    error = error_of({"namesrvAddr": "h:1", key: value})
    assert error.key == key


@pytest.mark.parametrize("key", ["forceRegister", "compressedRegister"])
def test_s37_boolean_yes_is_an_error(key: str):
    error = error_of({"namesrvAddr": "h:1", key: "yes"})
    assert error.key == key
    assert "yes" in str(error)


def test_s37_missing_namesrv_addr_everywhere():
    error = error_of({"brokerName": "broker-a"}, env={})
    assert error.key == "namesrvAddr"
    assert "NAMESRV_ADDR" in str(error)


def test_s37_bad_env_namesrv_addr_is_reported_against_the_environment():
    with pytest.raises(ConfigError) as info:
        load_broker_config({}, "f", environ={"NAMESRV_ADDR": "no-port"})
    assert info.value.key == "NAMESRV_ADDR"


def test_s37_placeholder_in_store_path_only_matters_without_topics_json(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nnamesrvAddr=127.0.0.1:9876\nstorePathRootDir=${ROCKETMQ_HOME}/store\n")
    without = run_cli("broker_agent", "--broker-config", str(conf))
    assert without.returncode == 2
    assert without.stderr.count("\n") == 1
    assert "storePathRootDir" in without.stderr
    assert "--topics-json" in without.stderr
    config = load_broker_config(read_properties(conf), str(conf))
    assert config.store_path_root_dir == "${ROCKETMQ_HOME}/store"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("brokerNotActiveTimeoutMillis", "7200000"),
        ("brokerNotActiveTimeoutMillis", "50"),
        ("zoneName", "zone\x01a"),
        ("zoneName", "z" * 256),
    ],
)
def test_values_the_nameserver_would_refuse_are_config_errors(key: str, value: str) -> None:
    """The agent refuses at start what every NameServer would refuse at each registration."""
    with pytest.raises(ConfigError, match=key):
        load_props({"namesrvAddr": "127.0.0.1:9876", key: value})


def test_heartbeat_timeout_in_range_is_read() -> None:
    assert (
        load_props({"namesrvAddr": "127.0.0.1:9876", "brokerNotActiveTimeoutMillis": "10000"}).heartbeat_timeout_millis
        == 10000
    )
