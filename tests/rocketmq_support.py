"""The real Apache RocketMQ in tests: Java NameServers, brokers, proxies, mqadmin and small Java
client programs, started from the pinned jars that ``scripts/install-rocketmq.sh`` (``make rocketmq``)
copies into ``build/rocketmq/<version>/lib``.

Every process runs on 127.0.0.1 with ports from the OS, a temporary work directory (its store,
``ROCKETMQ_HOME`` and ``user.home``, so RocketMQ's own logs land in ``<workdir>/logs/rocketmqlogs``), a
small heap and JDK 17's ``--add-opens`` flags. A process that does not print its boot line in time
raises :class:`JavaStartError` with the tail of its output and logs; the output file is kept
(``JavaProcess.log_path``).

Missing jars (or no ``java``/``javac``) skip the tests, unless ``NAMESRV_REQUIRE_ROCKETMQ=1`` (set
by ``make test``): then they fail.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.metrics_support import worker_port_range

ROOT = Path(__file__).resolve().parent.parent
INSTALL_DIR = ROOT / "build" / "rocketmq"
"""Where ``scripts/install-rocketmq.sh`` puts ``<version>/lib`` (and this module ``classes/``)."""
JAVA_SOURCES = ROOT / "tests" / "rocketmq" / "java"

ROCKETMQ_5 = "5.5.0"
"""The newest RocketMQ 5.x whose namesrv, broker and proxy Maven Central serves (5.5.1's namesrv: not)."""
ROCKETMQ_4 = "4.9.7"
"""The last RocketMQ 4.x whose broker and namesrv Maven Central serves (4.9.8 publishes clients only)."""
CLIENT_JAVA = "client-java"
"""rocketmq-client-java 5.0.8, the RocketMQ 5 gRPC client (its own lib: it shades its gRPC)."""
CLIENT_JAVA_VERSION = "5.0.8"

JDK17_FLAGS = (
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
)
"""What RocketMQ 4.9.x/5.x need on JDK 17 (reflection into NIO buffers for the mmapped store)."""
SMALL_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-XX:-OmitStackTraceInFastThrow")
"""A 2-core test box runs several JVMs: one GC thread, the C1 compiler only (quick start)."""

RUNSERVER_JVM_FLAGS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:MetaspaceSize=128m",
    "-XX:MaxMetaspaceSize=320m",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:-UseLargePages",
)
"""The JVM flags of RocketMQ 5.x's ``bin/runserver.sh`` on JDK 9+ (G1, full JIT; GC logging left out),
heap aside (runserver.sh: ``-Xms4g -Xmx4g``; :func:`start_java_namesrv` takes ``heap_mb``): what a
production NameServer runs with, for the benchmarks (``bench/java_peer.py``)."""

NO_SERVER_TLS: Mapping[str, str] = {"tls.server.mode": "disabled"}
"""System properties of the NameServer, broker and proxy JVMs the tests start: no TLS on their server
ports.
RocketMQ's default (``tls.server.mode=permissive`` with ``tls.test.mode.enable=true``) makes each
``NettyRemotingServer`` build a self-signed certificate at start, a new 2048-bit RSA key: profiled
with JFR, prime search was most of a Java NameServer's 3.6 s of start-up CPU under the C1-only
flags (the broker has two such servers). No test reaches a Java server over TLS; the TLS tests
reach ours, from Java clients (tests/test_rocketmq_security.py); the gRPC client of the proxy tests
dials plaintext."""

BOOT_TIMEOUT = 120.0
"""Seconds a server JVM may take to print its boot line on a loaded 2-core box."""

SMALL_BROKER_CONF: Mapping[str, str] = {
    "brokerIP1": "127.0.0.1",
    "brokerIP2": "127.0.0.1",
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(60_000),
    "mapedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mapedFileSizeConsumeQueue": str(60_000),
    "mappedFileSizeTimerLog": str(8 * 1024 * 1024),
    "flushIntervalCommitLog": "500",
    "deleteWhen": "04",
    "fileReservedTime": "1",
    "diskMaxUsedSpaceRatio": "95",
    "sendMessageThreadPoolNums": "2",
    "pullMessageThreadPoolNums": "4",
    "useReentrantLockWhenPutMessage": "true",
    "transactionMetricFlushInterval": "200",
    "timerFlushIntervalMs": "60000",
}
"""Broker settings for tests: 16 MiB commit log files (RocketMQ: 1 GiB), an 8 MiB timer log (5.x:
100 MiB; the timer wheel stays on: 5.5.0's deleteTopic fails without it), loopback addresses; keys
a version does not know are ignored by it (4.x spells ``maped``).

Two keys keep 5.5.0's background threads from burning the test machine's cores (measured per
thread from /proc: a broker's first 10 s cost 12 s of CPU with the defaults, 1 s with these):
``TransactionMetricsFlushService`` spins without sleeping until its first flush is due
(``transactionMetricFlushInterval``, default 10 s), and ``TimerFlushService`` compares the whole
38 MB timer wheel with its file byte by byte every ``timerFlushIntervalMs`` (default 1 s; no timer
messages are sent in the tests, and a broker's shutdown flushes it anyway)."""


class JavaStartError(RuntimeError):
    """A Java process exited or did not print its boot line in time; the message holds its logs."""


def require_rocketmq(*names: str) -> None:
    """Skip the calling test (or module) unless java, javac and ``build/rocketmq/NAME/lib`` for every
    name are present; with ``NAMESRV_REQUIRE_ROCKETMQ=1`` fail instead (``make test`` sets it, after
    installing them with ``make rocketmq``)."""
    missing = [str(lib_dir(name)) for name in names if not any(lib_dir(name).glob("*.jar"))]
    missing += [tool for tool in ("java", "javac") if not _which(tool)]
    if not missing:
        return
    reason = f"real RocketMQ missing: {', '.join(missing)} (run `make rocketmq`)"
    if os.environ.get("NAMESRV_REQUIRE_ROCKETMQ") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _which(tool: str) -> bool:
    return any((Path(d) / tool).is_file() for d in os.environ.get("PATH", "").split(os.pathsep) if d)


def lib_dir(name: str) -> Path:
    """``build/rocketmq/NAME/lib``: NAME is :data:`ROCKETMQ_5`, :data:`ROCKETMQ_4` or :data:`CLIENT_JAVA`."""
    return INSTALL_DIR / name / "lib"


def classpath(name: str, *extra: Path) -> str:
    """The ``-cp`` value: the lib's jars (a wildcard) and any extra directories before them."""
    return os.pathsep.join([*(str(p) for p in extra), str(lib_dir(name) / "*")])


def free_port_block(size: int = 1, low: int = 20000, high: int = 32000) -> int:
    """The first port of ``size`` consecutive free loopback ports, below Linux's ephemeral range
    (32768+) so that no outgoing connection takes one before the JVM binds it. A broker needs 4:
    ``listenPort - 2`` (its VIP channel), ``listenPort``, ``listenPort + 1`` (HA)."""
    low, high = worker_port_range(low, high)
    rng = int.from_bytes(os.urandom(4), "big")
    for attempt in range(200):
        base = low + (rng + attempt * 7919) % (high - low - size)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + size):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no {size} consecutive free ports in {low}..{high}")


def _write_properties(path: Path, conf: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return path


_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{yyyy-MM-dd HH:mm:ss.SSS}} %-5level [%thread] %logger{{32}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def _logback(part: str) -> dict[str, str]:
    """5.x picks its logging configuration by this property (RocketMQ's ``bin/mqnamesrv`` etc. set it);
    the files are resources of its jars. 4.x ignores it."""
    return {"rmq.logback.configurationFile": f"rmq.{part}.logback.xml"}


def _rocketmq_home(workdir: Path) -> Path:
    """A ROCKETMQ_HOME for one process: 4.x reads ``conf/logback_{namesrv,broker,tools}.xml`` from
    it (5.x carries its own logging configuration in its jars)."""
    home = workdir / "home"
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for part in ("namesrv", "broker", "tools"):
        (conf / f"logback_{part}.xml").write_text(_LOGBACK.format(log=workdir / "logs" / f"{part}.log"))
    return home


@dataclass
class JavaProcess:
    """A running RocketMQ JVM (server or client program).

    ``addr`` is ``127.0.0.1:port`` of its main listening port (NameServer/broker remoting, proxy
    gRPC; empty for clients); ``log_path`` the file with its stdout and stderr; ``workdir`` holds
    its store, home and RocketMQ's own logs."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    workdir: Path
    addr: str = ""
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (RocketMQ's shutdown hooks run: a broker unregisters itself), wait, then SIGKILL.
        Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait(10)

    def kill9(self) -> None:
        """SIGKILL: the JVM dies at once, its connections are closed by the kernel."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)

    def logs(self, tail: int = 60) -> str:
        """The last ``tail`` lines of its output and of every RocketMQ log file in its workdir."""
        parts = [f"--- {self.name}: {self.log_path} ---", _tail(self.log_path, tail)]
        for log in sorted(self.workdir.glob("logs/**/*.log")):
            if log.stat().st_size:
                parts += [f"--- {log} ---", _tail(log, tail)]
        return "\n".join(parts)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"({e})"


def _java_command(
    name: str,
    workdir: Path,
    main: str,
    args: Sequence[str],
    heap_mb: int,
    props: Mapping[str, str],
    extra_cp: Sequence[Path] = (),
    jvm_flags: Sequence[str] = SMALL_JVM_FLAGS,
) -> list[str]:
    home = _rocketmq_home(workdir)
    system_props = {
        "user.home": str(workdir),
        "rocketmq.home.dir": str(home),
        "rocketmq.client.logRoot": str(workdir / "logs" / "rocketmqlogs"),
        "rocketmq.log.root": str(workdir / "logs" / "rocketmqlogs"),
        "java.net.preferIPv4Stack": "true",
        **props,
    }
    return [
        "java",
        f"-Xms{min(heap_mb, 64)}m",
        f"-Xmx{heap_mb}m",
        f"-XX:MaxDirectMemorySize={heap_mb}m",
        *jvm_flags,
        *JDK17_FLAGS,
        *(f"-D{k}={v}" for k, v in system_props.items()),
        "-cp",
        classpath(name, *extra_cp),
        main,
        *args,
    ]


def _java_env(workdir: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    result = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "JAVA_TOOL_OPTIONS", "JAVA_OPTS")}
    result["ROCKETMQ_HOME"] = str(workdir / "home")
    result.update(env or {})
    return result


def start_java(
    name: str,
    workdir: Path,
    main: str,
    args: Sequence[str],
    *,
    boot_line: str,
    addr: str = "",
    heap_mb: int = 256,
    props: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = BOOT_TIMEOUT,
    label: str | None = None,
    extra_cp: Sequence[Path] = (),
    jvm_flags: Sequence[str] = SMALL_JVM_FLAGS,
) -> JavaProcess:
    """Start ``java MAIN ARGS`` with the jars of ``name`` and wait until its output contains
    ``boot_line``; raise :class:`JavaStartError` (with its logs) when it exits first or ``timeout``
    seconds pass (then it is killed)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{label or main.rsplit('.', 1)[-1]}.out"
    command = _java_command(name, workdir, main, args, heap_mb, props or {}, extra_cp, jvm_flags)
    with log_path.open("ab") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            env=_java_env(workdir, env),
        )
    java = JavaProcess(label or main.rsplit(".", 1)[-1], process, log_path, workdir, addr)
    deadline = time.monotonic() + timeout
    while boot_line not in log_path.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            java.kill9()
            why = (
                f"exited with {process.returncode}"
                if process.returncode not in (None, -9)
                else f"no boot line in {timeout:.0f} s"
            )
            raise JavaStartError(f"{java.name} {why} (waited for {boot_line!r})\n{java.logs()}")
        time.sleep(0.1)
    return java


def start_java_namesrv(
    version: str,
    workdir: Path,
    *,
    heap_mb: int = 256,
    jvm_flags: Sequence[str] = SMALL_JVM_FLAGS,
    **conf: object,
) -> JavaProcess:
    """The Java NameServer of ``version`` (``NamesrvStartup -c namesrv.conf``) on a free port;
    ``conf`` adds NamesrvConfig/NettyServerConfig keys (``listenPort`` is chosen here unless given).
    ``heap_mb`` and ``jvm_flags`` (default: small, quick-starting JVMs for tests) are for benchmarks,
    which run it as RocketMQ's ``runserver.sh`` does (:data:`RUNSERVER_JVM_FLAGS`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = int(str(conf.pop("listenPort", 0))) or free_port_block()
    conf_file = _write_properties(
        workdir / "namesrv.conf",
        {
            "listenPort": port,
            "kvConfigPath": workdir / "kvConfig.json",
            "configStorePath": workdir / "namesrv.properties",
            **conf,
        },
    )
    return start_java(
        version,
        workdir,
        "org.apache.rocketmq.namesrv.NamesrvStartup",
        ["-c", str(conf_file)],
        boot_line="The Name Server boot success",
        addr=f"127.0.0.1:{port}",
        label="namesrv",
        heap_mb=heap_mb,
        props={**NO_SERVER_TLS, **_logback("namesrv")},
        jvm_flags=jvm_flags,
    )


def java_namesrv_printed_config(version: str, workdir: Path, timeout: float = 120) -> dict[str, str]:
    """What ``mqnamesrv -p`` of ``version`` prints (``NamesrvStartup -p``: every key of its
    ``NamesrvConfig``, ``NettyServerConfig`` and ``NettyClientConfig`` with its value, the keys an
    operator's ``namesrv.conf`` may hold), as key -> value. 5.x prints them on the console; raises
    RuntimeError with the output when the JVM fails or prints none."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = _java_command(
        version, workdir, "org.apache.rocketmq.namesrv.NamesrvStartup", ["-p"], 128, _logback("namesrv")
    )
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=_java_env(workdir, None)
    )
    printed = dict(re.findall(r" - ([A-Za-z][\w.]*)=(.*)$", done.stdout, re.MULTILINE))
    if done.returncode != 0 or not printed:
        raise RuntimeError(
            f"NamesrvStartup -p of {version} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return printed


def broker_conf(
    workdir: Path, namesrv_addr: str, conf: Mapping[str, str] | None = None, *, listen_port: int = 0
) -> dict[str, str]:
    """A complete broker.conf for a test broker: store paths under ``workdir/store``, a free block
    of ports, :data:`SMALL_BROKER_CONF`, then ``conf`` (brokerName, brokerId, brokerRole, ...)."""
    port = listen_port or free_port_block(4) + 2
    store = workdir / "store"
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "namesrvAddr": namesrv_addr,
        "listenPort": str(port),
        "haListenPort": str(port + 1),
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        **SMALL_BROKER_CONF,
        **(conf or {}),
    }


def start_java_broker(
    version: str,
    workdir: Path,
    namesrv_addr: str,
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    heap_mb: int = 320,
    props: Mapping[str, str] | None = None,
) -> JavaProcess:
    """A Java broker of ``version`` started as ``BrokerStartup -c WORKDIR/broker.conf`` (the file is
    :func:`broker_conf` of ``conf``; ``namesrvAddr`` from ``namesrv_addr``), waiting for its
    ``boot success`` line, which it prints after its first registration was sent. ``.addr`` is its
    remoting address, ``.ports`` holds ``listenPort`` and ``haListenPort``."""
    workdir.mkdir(parents=True, exist_ok=True)
    full = broker_conf(workdir, namesrv_addr, conf)
    conf_file = _write_properties(workdir / "broker.conf", full)
    port = int(full["listenPort"])
    broker = start_java(
        version,
        workdir,
        "org.apache.rocketmq.broker.BrokerStartup",
        ["-c", str(conf_file)],
        boot_line="boot success",
        addr=f"127.0.0.1:{port}",
        label=f"broker-{full['brokerName']}-{full['brokerId']}",
        heap_mb=heap_mb,
        props={**NO_SERVER_TLS, **_logback("broker"), **(props or {})},
        env=env,
    )
    broker.ports = {"listenPort": port, "haListenPort": int(full["haListenPort"])}
    return broker


def start_java_proxy(
    workdir: Path,
    namesrv_addr: str,
    conf: Mapping[str, object] | None = None,
    *,
    version: str = ROCKETMQ_5,
    attempts: int = 3,
) -> JavaProcess:
    """A 5.x ``rocketmq-proxy`` in cluster mode (``ProxyStartup -pm cluster -pc rmq-proxy.json``)
    pointed at ``namesrv_addr``; ``.addr`` is its gRPC endpoint (plaintext only:
    :data:`NO_SERVER_TLS`), ``.ports`` holds ``grpcServerPort`` and ``remotingListenPort``.

    At start the proxy creates its system topics and gives each NameServer call 3 s and the check
    three immediate tries (``DefaultAdminService.createTopicOnTopicBrokerIfNotExist``): on a starved
    machine that start fails now and then, so it is tried up to ``attempts`` times (fresh ports and
    directory each time); the error of the last one is raised."""
    import json

    last: JavaStartError | None = None
    for attempt in range(attempts):
        attempt_dir = workdir if attempt == 0 else workdir.with_name(f"{workdir.name}-retry{attempt}")
        attempt_dir.mkdir(parents=True, exist_ok=True)
        grpc_port = free_port_block(1)
        remoting_port = free_port_block(1)
        full = {
            "rocketMQClusterName": "DefaultCluster",
            "namesrvAddr": namesrv_addr,
            "proxyMode": "cluster",
            "grpcServerPort": grpc_port,
            "remotingListenPort": remoting_port,
            "metricCollectorMode": "off",
            **(conf or {}),
        }
        conf_file = attempt_dir / "rmq-proxy.json"
        conf_file.write_text(json.dumps(full, indent=2))
        try:
            proxy = start_java(
                version,
                attempt_dir,
                "org.apache.rocketmq.proxy.ProxyStartup",
                ["-pm", "cluster", "-pc", str(conf_file)],
                boot_line="rocketmq-proxy startup successfully",
                addr=f"127.0.0.1:{grpc_port}",
                label="proxy",
                heap_mb=384,
                props={**NO_SERVER_TLS, **_logback("proxy")},
            )
        except JavaStartError as e:
            last = e
            continue
        proxy.ports = {"grpcServerPort": grpc_port, "remotingListenPort": remoting_port}
        return proxy
    assert last is not None
    raise last


def cluster_info(namesrv_addr: str, timeout: float = 10) -> dict[str, Any]:
    """``GET_BROKER_CLUSTER_INFO`` (106) of any NameServer (Java or ours), the body parsed as
    RocketMQ's JSON: ``{"brokerAddrTable": {name: {"brokerAddrs": {"0": addr}, ...}},
    "clusterAddrTable": {cluster: [names]}}`` (integer keys as strings)."""
    from namesrv_grpc.wire.fastjson import loads
    from tests.remoting_support import RemotingTestClient

    with RemotingTestClient(namesrv_addr, timeout) as client:
        answer = client.call(106)
    if answer.code != 0:
        raise RuntimeError(f"GET_BROKER_CLUSTER_INFO of {namesrv_addr}: code {answer.code} {answer.remark}")
    info: dict[str, Any] = loads(answer.body)
    for data in info.get("brokerAddrTable", {}).values():
        data["brokerAddrs"] = {str(k): v for k, v in data.get("brokerAddrs", {}).items()}
    return info


def wait_registered(namesrv_addr: str, broker_name: str, broker_id: int = 0, timeout: float = 60) -> str:
    """Wait until ``namesrv_addr`` lists ``broker_name``/``broker_id`` (a Java broker prints its boot
    line before its first registration arrives) and return its address; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        data = cluster_info(namesrv_addr).get("brokerAddrTable", {}).get(broker_name, {})
        addr = data.get("brokerAddrs", {}).get(str(broker_id))
        if addr:
            return str(addr)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker_name}/{broker_id} not registered with {namesrv_addr} in {timeout} s")
        time.sleep(0.2)


def wait_unregistered(namesrv_addr: str, broker_name: str, broker_id: int = 0, timeout: float = 60) -> None:
    """Wait until ``namesrv_addr`` no longer lists ``broker_name``/``broker_id``; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        data = cluster_info(namesrv_addr).get("brokerAddrTable", {}).get(broker_name, {})
        if str(broker_id) not in data.get("brokerAddrs", {}):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker_name}/{broker_id} still registered with {namesrv_addr} after {timeout} s")
        time.sleep(0.1)


@dataclass
class MqadminResult:
    """One ``mqadmin`` command: its arguments, exit code and output (stdout and stderr)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def mqadmin(
    version: str,
    namesrv_addr: str,
    *args: str,
    workdir: Path | None = None,
    timeout: float = 90,
    access_key: str | None = None,
    secret_key: str | None = None,
    props: Mapping[str, str] | None = None,
) -> MqadminResult:
    """Run ``mqadmin ARGS -n NAMESRV_ADDR`` (``MQAdminStartup``, one JVM) of ``version``; with
    ``access_key``/``secret_key`` it signs every request (RocketMQ reads them from
    ``$ROCKETMQ_HOME/conf/tools.yml``). ``-n`` is appended unless ``namesrv_addr`` is empty."""
    import tempfile

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mqadmin-")))
        workdir.mkdir(parents=True, exist_ok=True)
        home = _rocketmq_home(workdir)
        if access_key is not None:
            (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\nsecretKey: {secret_key}\n")
        full_args = [*args, *(("-n", namesrv_addr) if namesrv_addr else ())]
        command = _java_command(
            version, workdir, "org.apache.rocketmq.tools.command.MQAdminStartup", full_args, 128, props or {}
        )
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=_java_env(workdir, None)
        )
        return MqadminResult(tuple(args), done.returncode, done.stdout, done.stderr)


def mqadmin_batch(
    version: str,
    commands: Sequence[Sequence[str]],
    *,
    workdir: Path,
    timeout: float = 300,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> list[str]:
    """Run many mqadmin commands (each a list of arguments, ``-n`` included) in one JVM
    (``tests/rocketmq/java/MqadminBatch.java``: ``MQAdminStartup.main0`` per command, as
    ``bin/mqadmin`` runs it); returns each command's output (stdout and stderr merged). Signs with
    ``access_key``/``secret_key`` like :func:`mqadmin`."""
    for args in commands:
        bad = [a for a in args if "\t" in a or "\n" in a]
        if bad:
            raise ValueError(f"mqadmin arguments may not hold tabs or newlines: {bad}")
    home = _rocketmq_home(workdir)
    if access_key is not None:
        (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\nsecretKey: {secret_key}\n")
    done = run_java_client(
        version,
        "MqadminBatch",
        workdir=workdir,
        timeout=timeout,
        props=_logback("tools"),
        stdin="".join("\t".join(args) + "\n" for args in commands),
    )
    outputs = done.stdout.split("@@END\n")
    if done.returncode != 0 or len(outputs) != len(commands) + 1:
        raise RuntimeError(f"mqadmin batch failed (exit {done.returncode}):\n{done.stdout}{done.stderr[-3000:]}")
    return outputs[:-1]


def compiled_classes(name: str) -> Path:
    """``tests/rocketmq/java/*.java`` compiled against the jars of ``name`` into
    ``build/rocketmq/classes/NAME-<hash of sources and jar names>`` (once; reused while neither
    changes). ``GrpcClient*.java`` compiles only against :data:`CLIENT_JAVA`, the rest only against
    the remoting versions. Raises RuntimeError with javac's output on a compile error."""
    sources = sorted(p for p in JAVA_SOURCES.glob("*.java") if p.name.startswith("Grpc") == (name == CLIENT_JAVA))
    digest = hashlib.sha256(name.encode())
    for path in sources:
        digest.update(path.name.encode() + path.read_bytes())
    for jar in sorted(lib_dir(name).glob("*.jar")):
        digest.update(jar.name.encode())
    out = INSTALL_DIR / "classes" / f"{name}-{digest.hexdigest()[:16]}"
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    with (INSTALL_DIR / ".classes.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".compiled").exists():
            return out
        out.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "11",
             "-cp", classpath(name), "-d", str(out), *map(str, sources)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"javac against {name} failed:\n{done.stdout}{done.stderr}")
        (out / ".compiled").touch()
    return out


def run_java_client(
    name: str,
    main: str,
    *args: str,
    workdir: Path,
    timeout: float = 120,
    props: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of the test programs (``tests/rocketmq/java/MAIN.java``) with the client jars of
    ``name`` to completion; its output is also appended to ``workdir/MAIN.out``."""
    classes = compiled_classes(name)
    workdir.mkdir(parents=True, exist_ok=True)
    _rocketmq_home(workdir)
    command = _java_command(name, workdir, main, args, 192, {**_logback("client"), **(props or {})}, [classes])
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=_java_env(workdir, None), input=stdin
    )
    with (workdir / f"{main}.out").open("a") as log:
        log.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}\n(exit {done.returncode})\n")
    return done


class JavaClient:
    """A long-running test program driven line by line: :meth:`send` writes a command to its stdin,
    :meth:`read_until` collects its stdout lines (read by a thread) until one starts with a marker."""

    def __init__(
        self,
        name: str,
        main: str,
        *args: str,
        workdir: Path,
        props: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``props`` become ``-D`` system properties, ``env`` is added to the environment (e.g.
        ``ROCKETMQ_ZONE``, which RocketMQ's clients read)."""
        classes = compiled_classes(name)
        workdir.mkdir(parents=True, exist_ok=True)
        _rocketmq_home(workdir)
        self.main = main
        self.workdir = workdir
        self.log_path = workdir / f"{main}.out"
        command = _java_command(name, workdir, main, args, 192, {**_logback("client"), **(props or {})}, [classes])
        self._log = self.log_path.open("a")
        self._log.write("$ " + " ".join(command) + "\n")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=workdir,
            env=_java_env(workdir, env),
        )
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._read_pos = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._log.write(line)
            self._log.flush()
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def read_until(self, prefix: str, timeout: float = 120) -> list[str]:
        """The lines printed since the last call, up to and including the first starting with
        ``prefix``; raise TimeoutError (with the program's log) when none comes in ``timeout`` s or
        it exits."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(self._read_pos, len(self._lines)):
                    if self._lines[i].startswith(prefix):
                        got = self._lines[self._read_pos : i + 1]
                        self._read_pos = i + 1
                        return got
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise TimeoutError(f"{self.main}: no line starting with {prefix!r}\n{_tail(self.log_path, 80)}")
                self._cond.wait(min(left, 1.0))

    def lines(self) -> list[str]:
        """Every stdout line so far."""
        with self._cond:
            return list(self._lines)

    def close(self, timeout: float = 30) -> int:
        """Send ``quit``, wait for the exit (then SIGKILL) and return the exit code."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.send("quit")
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        self._log.close()
        return self.process.returncode


@contextlib.contextmanager
def java_processes() -> Iterator[list[JavaProcess]]:
    """A list to put started processes in; every one still alive is stopped on exit (SIGTERM, then
    SIGKILL), and when the block raised, each one's logs are printed (pytest shows them)."""
    started: list[JavaProcess] = []
    try:
        yield started
    except BaseException:
        for proc in started:
            print(proc.logs())
        raise
    finally:
        for proc in reversed(started):
            with contextlib.suppress(Exception):
                proc.stop(timeout=20)
