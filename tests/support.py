"""Helpers shared by the tests: real NameServer / agent processes on loopback, request builders,
and readers of the rich error details."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc, kv_config_service_pb2_grpc, name_server_service_pb2_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.core.body import BrokerIdentity, DecodedBody
from namesrv_grpc.core.commands import Command, RegisterBroker, send_registration
from namesrv_grpc.core.model import DataVersion, RegisterBrokerResult, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.processes.route_table_service import RouteTableService
from namesrv_grpc.wire.grpc_register_body import decode_protobuf_body, encode_body, verify_checksum

ResultT = TypeVar("ResultT")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "rocketmq"
"""The shared real broker files, when present beside the checkout; tests fall back to examples/."""


def fixture_path(name: str) -> Path:
    """A real broker file: ../shared/fixtures/rocketmq/NAME, else the copy in examples/."""
    shared = FIXTURES / name
    return shared if shared.exists() else EXAMPLES / name


TEST_SERVING_PROCESSES = os.environ.get("NAMESRV_TEST_SERVING_PROCESSES", "1")
"""``--workers`` of the servers the tests start (:func:`spawn_namesrv`) when a test does not choose:
one serving process, which starts with ~0.7 s less CPU than the two of this 2-core machine's default
(a third of a start-up; ~300 servers per run). What crosses between serving processes is tested
where it is the point, with ``--workers`` named (tests/test_processes.py, tests/test_grpc_bounds.py);
``NAMESRV_TEST_SERVING_PROCESSES=0`` runs every test server with the default instead
(docs/development.md)."""


SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The short-lived JVMs of the tests (the driver JVM of the Spark sessions and spark-submit runs,
the Java example client): the C1 compiler only and one GC thread. Their work is small, so C2's
compilations never pay back: the four analytics modules took 368 CPU-s with these flags against 448
without (one worker, same machine, same wall time); a lookup of the Java example client 1.5 CPU-s
against 2.3-2.8."""

SPARK_TEST_CONF = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.constraintPropagation.enabled": "false",
}
"""Spark settings of the tests' Spark session (the ``spark`` fixture): expressions interpreted, not
compiled (Janino), no whole-stage code generation, no adaptive re-planning, no constraint
propagation (the optimizer rule that infers extra filters, such as ``isnotnull``, from a plan's
constraints). The tests' inputs are a few hundred rows, so compiling each query's code or
optimizing its plan harder never pays back; the answers are the same (Spark's own test suites run
both ways). The analytics modules' session tests on one worker: 132-149 -> 100 CPU-s, 101-114 ->
79 s without code generation; then 138-152 -> 121-126 CPU-s without constraint propagation too
(docs/development.md). The end-to-end test's ``spark-submit`` run keeps Spark's defaults: one job
runs as the jobs ship."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


@dataclass
class NamesrvProcess:
    """A NameServer started as ``python -m namesrv_grpc`` on 127.0.0.1 and a free port."""

    process: subprocess.Popen[str]
    port: int
    workdir: Path
    remoting_port: int = 0
    """The RocketMQ remoting port (``port`` is the gRPC one)."""

    @property
    def address(self) -> str:
        """gRPC ``host:port``."""
        return f"127.0.0.1:{self.port}"

    @property
    def remoting_address(self) -> str:
        """RocketMQ remoting ``host:port``."""
        return f"127.0.0.1:{self.remoting_port}"

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.address)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        """Send ``sig`` and return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    @property
    def stderr_path(self) -> Path:
        """Where the server's log (stderr) goes: a file, so a chatty server never blocks on a full pipe."""
        return self.workdir / "namesrv.stderr"

    def output(self) -> tuple[str, str]:
        """stdout and stderr, after the process ended."""
        out, err = self.process.communicate(timeout=15)
        return out, err if err is not None else self.stderr_path.read_text()


@dataclass
class Stubs:
    """Blocking stubs of every service on one channel."""

    channel: grpc.Channel

    def __post_init__(self) -> None:
        self.ns = name_server_service_pb2_grpc.NameServerServiceStub(self.channel)
        self.kv = kv_config_service_pb2_grpc.KVConfigServiceStub(self.channel)
        self.admin = admin_service_pb2_grpc.AdminServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)


def spawn_namesrv(
    workdir: Path,
    *extra: str,
    health_port: int = 0,
    cpus: set[int] | None = None,
    env: Mapping[str, str] | None = None,
) -> NamesrvProcess:
    """Start a NameServer process (kv config and config store inside ``workdir``), wait until it
    answers health checks (on ``health_port`` when given: pass ``--health-port`` with it in ``extra``
    when the gRPC port speaks TLS); raise RuntimeError with its stderr when it does not start in 20 s.
    ``cpus``: the CPUs it may run on (``os.sched_setaffinity``). It runs :data:`TEST_SERVING_PROCESSES`
    serving processes unless ``extra`` names ``--workers`` or ``cpus`` is given (then the default:
    one per CPU it may use). ``env``: variables added to its environment."""
    workdir.mkdir(parents=True, exist_ok=True)
    if "--workers" not in extra and cpus is None:
        extra = ("--workers", TEST_SERVING_PROCESSES, *extra)
    args = [
        sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
        "--kv-config-path", str(workdir / "kvConfig.json"),
        "--config-store-path", str(workdir / "namesrv.properties"),
        *extra,
    ]  # fmt: skip
    with (workdir / "namesrv.stderr").open("a") as stderr:
        process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**_env(), **(env or {})},
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "boot success" not in line:
        process.kill()
        process.communicate(timeout=10)
        raise RuntimeError(f"namesrv did not start: {line!r} {(workdir / 'namesrv.stderr').read_text()}")
    ports = parse_boot_line(line)
    server = NamesrvProcess(process, ports["gRPC"], workdir, ports["remoting"])
    wait_serving(f"127.0.0.1:{health_port}" if health_port else server.address)
    return server


def namesrv_children(pid: int, name: str) -> list[int]:
    """The pids of ``namesrv`` ``pid``'s children called ``name`` (``serving process`` or
    ``route-table process``), found by the title ps shows (``namesrv: serving process 1 (...)``;
    processes/fork_server.py). They are children of its fork server; a process that exited and was
    not reaped yet (a zombie) is not one."""
    import psutil

    pids = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if " ".join(child.cmdline()).startswith(f"namesrv: {name}") and child.status() != psutil.STATUS_ZOMBIE:
                pids.append(child.pid)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            pass
    return pids


def wait_serving(address: str, timeout: float = 20) -> None:
    """Wait until the gRPC health check of ``address`` says SERVING."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                if (
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=2).status
                    == health_pb2.HealthCheckResponse.SERVING
                ):
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)


@contextmanager
def running_namesrv(
    workdir: Path, *extra: str, health_port: int = 0, env: Mapping[str, str] | None = None
) -> Iterator[NamesrvProcess]:
    """A NameServer process for the ``with`` block; stopped with SIGTERM afterwards."""
    server = spawn_namesrv(workdir, *extra, health_port=health_port, env=env)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()
        server.process.stdout.close()  # type: ignore[union-attr]


def empty_namesrv(server: NamesrvProcess, stubs: Stubs, config: Mapping[str, str]) -> None:
    """Bring a NameServer that a module's tests share back to what a fresh one holds, through its
    public API only: every broker of ``GetBrokerLiveTable`` unregistered, every topic still listed
    (a topic of ``RegisterTopic`` outlives its brokers) deleted, every KV entry its
    ``kvConfig.json`` holds (RocketMQ's file, written before a change is acknowledged) deleted,
    every config key whose value differs from ``config`` (``GetNamesrvConfig`` of the fresh server)
    set back. Then checks that nothing is left: AssertionError naming what is."""
    for broker in stubs.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=10).brokers:
        stubs.ns.UnregisterBroker(
            ns_pb2.UnregisterBrokerRequest(
                cluster_name=broker.cluster_name,
                broker_name=broker.broker_name,
                broker_id=broker.broker_id,
                broker_addr=broker.broker_addr,
            ),
            timeout=10,
        )
    for name in stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10).topics:
        stubs.admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic=name), timeout=10)
    kv_path = server.workdir / "kvConfig.json"
    if kv_path.exists():
        for namespace, table in json.loads(kv_path.read_text(encoding="utf-8"))["configTable"].items():
            for key in table:
                stubs.kv.DeleteKVConfig(kv_pb2.DeleteKVConfigRequest(namespace=namespace, key=key), timeout=10)
    now = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=10).config)
    changed = {key: value for key, value in config.items() if now.get(key) != value}
    if changed:
        stubs.admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config=changed), timeout=10)
    now = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=10).config)
    left = {
        "brokers": list(stubs.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=10).brokers),
        "broker names": list(
            stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=10).broker_addr_table
        ),
        "topics": list(stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=10).topics),
        "kv": json.loads(kv_path.read_text(encoding="utf-8"))["configTable"] if kv_path.exists() else {},
        "config": {key: value for key, value in now.items() if config.get(key) != value},
    }
    assert not any(left.values()), f"the shared NameServer still holds {left}"


SharedNamesrv = tuple[NamesrvProcess, Callable[[], None]]
"""A NameServer that a module's tests share, and the function that empties it (:func:`shared_namesrv`)."""


@contextmanager
def shared_namesrv(workdir: Path, *extra: str) -> Iterator[SharedNamesrv]:
    """One NameServer for a module's tests (``running_namesrv(workdir, *extra)``), and a function
    that empties it (:func:`empty_namesrv`): each test starts from what a fresh server holds,
    without a start-up of its own (~1.5 s of CPU each)."""
    with running_namesrv(workdir, *extra) as server, server.channel() as channel:
        stubs = Stubs(channel)
        config = dict(stubs.admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=10).config)
        yield server, lambda: empty_namesrv(server, stubs, config)


def spawn_agent(*args: str) -> subprocess.Popen[str]:
    """Start ``python -m broker_agent ARGS`` with pipes for stdout and stderr."""
    return subprocess.Popen(
        [sys.executable, "-m", "broker_agent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def run_cli(module: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``python -m MODULE ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, env=_env(), timeout=timeout
    )


def run_cli_in_process(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``MODULE.main(ARGS)`` to completion inside this test process, with stdout and stderr
    captured, and give what :func:`run_cli` gives (exit code: ``main``'s, or its SystemExit's, as
    ``python -m MODULE`` would exit). For a short-lived command whose process itself is not under
    test: it spares the ~0.4 CPU-s of a Python start-up and of its imports. The command's own
    process (exit on signals, a closed stdout pipe, the environment it reads) stays tested with
    :func:`run_cli`."""
    main: Callable[[list[str]], int] = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int = main(list(args))
        except SystemExit as exit_:  # argparse's errors (2), or SystemExit("message") (1)
            if isinstance(exit_.code, str):
                print(exit_.code, file=sys.stderr)
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return subprocess.CompletedProcess([sys.executable, "-m", module, *args], code, out.getvalue(), err.getvalue())


def topic(name: str, read: int = 4, write: int = 4, perm: int = 6, sys_flag: int = 0) -> TopicConfig:
    """A TopicConfig with the given queue numbers and perm."""
    return TopicConfig(name, read_queue_nums=read, write_queue_nums=write, perm=perm, topic_sys_flag=sys_flag)


def register_request(
    *,
    cluster: str = "DefaultCluster",
    broker_name: str = "broker-a",
    broker_id: int = 0,
    broker_addr: str = "127.0.0.1:10911",
    ha_server_addr: str = "127.0.0.1:10912",
    topics: Sequence[TopicConfig] | Mapping[str, TopicConfig] = (),
    version: DataVersion = DataVersion(0, 1, 1),
    filter_servers: Sequence[str] = (),
    compressed: bool = False,
    heartbeat_timeout_millis: int = 0,
) -> ns_pb2.RegisterBrokerRequest:
    """A valid RegisterBrokerRequest with a correctly encoded body and checksum."""
    table = dict(topics) if isinstance(topics, Mapping) else {t.topic_name: t for t in topics}
    body, crc = encode_body(table, version, filter_servers, compress=compressed)
    return ns_pb2.RegisterBrokerRequest(
        cluster_name=cluster,
        broker_name=broker_name,
        broker_id=broker_id,
        broker_addr=broker_addr,
        ha_server_addr=ha_server_addr,
        body=body,
        body_crc32c=crc,
        compressed=compressed,
        heartbeat_timeout_millis=heartbeat_timeout_millis,
    )


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The ``google.rpc.ErrorInfo`` inside a failed call's ``google.rpc.Status`` details."""
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status in the trailers"
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    raise AssertionError("no ErrorInfo in the status details")


class FakeClock:
    """A clock for RouteInfoManager: milliseconds, moved by hand."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, millis: int) -> None:
        self.now += millis


class LineWatcher:
    """Collects a process's stderr (or stdout) lines in a background thread, so tests can wait for a
    log line without blocking on the pipe."""

    def __init__(self, stream: object) -> None:
        import threading

        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, text: str, count: int = 1, timeout: float = 20) -> None:
        """Wait until ``count`` lines contain ``text``; raise AssertionError with the lines otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(text in line for line in self.lines) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {count} lines with {text!r} in:\n" + "".join(self.lines[-40:]))
                self._cond.wait(left)


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (:func:`tests.metrics_support.free_port`)."""
    from tests.metrics_support import free_port as below_ephemeral_range

    return below_ephemeral_range()


def poll_until(check: Callable[[], bool], timeout: float, interval: float = 0.01) -> float:
    """Poll ``check`` until it is true; return the seconds it took. Raise AssertionError on timeout."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)
    return time.monotonic() - start


LOADED_BOX_SLACK_SECONDS = 8.0
"""What a loaded 2-core CI machine may add to any wait in a real-process test (a starved process,
a slow scheduler). Such tests assert what happens, bounded by its own timeout plus this slack; the
latency targets themselves (removal within 1 s, route back within 1 s, ...) are measured by
``make bench`` (the liveness scenario in bench/liveness.py)."""


def register_broker(
    ns: NameServer,
    *,
    cluster_name: str,
    broker_name: str,
    broker_id: int,
    broker_addr: str,
    body: bytes,
    body_crc32c: int,
    ha_server_addr: str = "",
    compressed: bool = False,
    heartbeat_timeout_millis: int = 0,
    enable_acting_master: bool | None = None,
    zone_name: str = "",
    instance_id: str = "",
) -> tuple[RegisterBrokerResult, dict[str, str]]:
    """What a gRPC RegisterBroker does to ``ns``, in this process: the door's checksum (S01), then
    :func:`~namesrv_grpc.core.commands.send_registration` against the route-table process's handling
    (:class:`RouteTableService`: applied with the body held when it is the same, else decoded).
    Returns the result and the ORDER_TOPIC_CONFIG table; raises what the NameServer raises."""
    verify_checksum(body, body_crc32c)
    identity = BrokerIdentity(cluster_name, broker_name, broker_id, broker_addr)
    command = RegisterBroker(
        "grpc",
        identity,
        ha_server_addr=ha_server_addr,
        heartbeat_timeout_millis=heartbeat_timeout_millis,
        body_fingerprint=(body_crc32c, len(body), compressed),
        enable_acting_master=enable_acting_master,
        zone_name=zone_name,
        instance_id=instance_id,
    )
    limits = (ns.config.register_body_max_inflated_size, ns.config.register_body_max_topics)

    async def decode(known_topics: int | None) -> DecodedBody:
        return decode_protobuf_body(body, compressed, *limits, known_topics)

    reply = run_now(send_registration(LocalWrites(ns), command, decode, held=ns.registered_body(identity)))
    return reply.result, reply.kv_table


def run_now(coroutine: Coroutine[Any, Any, ResultT]) -> ResultT:
    """The result of a coroutine that never waits (:class:`LocalWrites` and a decoder that returns at
    once), without an event loop. Raises what it raises; RuntimeError when it waits for something."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(ResultT, done.value)
    coroutine.close()
    raise RuntimeError("the coroutine waited for something")


async def _no_snapshots() -> Any:
    raise AssertionError("no snapshots here")


class LocalWrites:
    """The writes (:class:`~namesrv_grpc.core.commands.RouteTableWrites`) applied in this process to
    the NameServer that also answers the reads (one table, no route-table process): for unit tests of
    a door. Each command goes to the route-table service's :meth:`~RouteTableService.apply`."""

    def __init__(self, ns: NameServer) -> None:
        self._service = RouteTableService(ns, _no_snapshots)

    async def send(self, command: Command[ResultT]) -> ResultT:
        result = self._service.apply(0, command)
        return cast(ResultT, await result if asyncio.iscoroutine(result) else result)
