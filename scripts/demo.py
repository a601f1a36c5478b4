"""``make demo``: a NameServer and three broker agents from the real broker files in examples/.

1. Start a NameServer on a free loopback port (built-in defaults, state in a temporary directory).
2. Start broker agents for broker-a master, broker-a slave (listenPort 10921) and broker-b master
   (listenPort 10931), all with brokerIP1=127.0.0.1.
3. Print the route of TopicTest: its queue data and its brokers with master and slave addresses,
   looked up over gRPC and over RocketMQ's remoting protocol (as every RocketMQ client does it).
4. broker-c registers over remoting as a Java 5.x broker does (REGISTER_BROKER with its whole topic
   table: the system topics its ``TopicConfigManager`` creates and java-topic); java-topic is looked
   up over gRPC and over remoting. One table, two protocols. broker-c then closes its connection and
   the NameServer removes it at once (S15).
5. Stop the slave (SIGTERM: it unregisters) and show the route without it, over gRPC and remoting.
6. Stop everything with SIGTERM and check that every process exited 0.

Exit code 0 when all of that happened; 1 with the reason otherwise (one line, ``demo failed: ...``).
Run by ``tests/test_demo.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv.v1 import types_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.client.remoting import RemotingClient
from namesrv_grpc.core.model import PERM_INHERIT, PERM_READ, PERM_WRITE, DataVersion, TopicConfig
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PERM_NAMES = ((8, "PRIORITY"), (4, "READ"), (2, "WRITE"), (1, "INHERIT"))


def perm_text(perm: int) -> str:
    """``6`` -> ``READ|WRITE``."""
    return "|".join(name for bit, name in PERM_NAMES if perm & bit) or "-"


def print_route(topic: str, route: types_pb2.TopicRouteData) -> None:
    """The route as a person reads it."""
    print(f"\nRoute of {topic}:")
    print(f"  {'broker name':<12} {'read':>5} {'write':>5}  perm")
    for q in route.queue_datas:
        print(f"  {q.broker_name:<12} {q.read_queue_nums:>5} {q.write_queue_nums:>5}  {perm_text(q.perm)}")
    for b in route.broker_datas:
        addrs = ", ".join(
            f"{'master' if broker_id == 0 else f'slave {broker_id}'} {addr}"
            for broker_id, addr in sorted(b.broker_addrs.items())
        )
        print(f"  {b.broker_name} ({b.cluster}): {addrs}")


async def remoting_lookup(port: int, topic: str) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC over RocketMQ remoting, as a RocketMQ client asks: the JSON body."""
    async with await RemotingClient.connect("127.0.0.1", port) as client:
        answer = await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"remoting lookup of {topic}: code {answer.code} {answer.remark}")
    return answer.body


def java_broker_topics(cluster: str, broker: str) -> dict[str, TopicConfig]:
    """The topic table a fresh RocketMQ 5.x broker registers with its defaults and
    ``traceTopicEnable=true``: the system topics of ``TopicConfigManager.init`` (broker/.../topic/
    TopicConfigManager.java), in its order. A real broker always registers these with its own
    topics, so its first registration never holds just one topic (S42)."""
    both = PERM_READ | PERM_WRITE
    topics = [
        TopicConfig("SELF_TEST_TOPIC", 1, 1),
        TopicConfig("TBW102", 8, 8, PERM_INHERIT | both),  # autoCreateTopicEnable, defaultTopicQueueNums 8
        TopicConfig("BenchmarkTest", 1024, 1024),
        TopicConfig(cluster, perm=PERM_INHERIT | both),  # clusterTopicEnable
        TopicConfig(broker, 1, 1, PERM_INHERIT | both),  # brokerTopicEnable
        TopicConfig("OFFSET_MOVED_EVENT", 1, 1),
        TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18),  # SCHEDULE_TOPIC_QUEUE_NUM
        TopicConfig("RMQ_SYS_TRACE_TOPIC", 1, 1),  # traceTopicEnable=true, msgTraceTopicName
        TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1),
        TopicConfig(f"rmq_sys_REVIVE_LOG_{cluster}", 8, 8),  # reviveQueueNum 8
        TopicConfig(f"rmq_sys_SYNC_BROKER_MEMBER_{broker}", 1, 1, PERM_INHERIT),
        TopicConfig("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1),
        TopicConfig("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1),
        TopicConfig("rmq_sys_wheel_timer", 1, 1),  # timerWheelEnable
    ]
    return {topic.topic_name: topic for topic in topics}


async def remoting_broker(port: int, route: Callable[[str], types_pb2.TopicRouteData]) -> None:
    """broker-c registers over remoting exactly as a Java 5.x broker does (compressed body, whole topic
    table), java-topic is looked up over gRPC (``route``, run in a thread) and over remoting while
    broker-c stays connected, then broker-c closes its connection. Raises RuntimeError when the
    NameServer refuses the registration or a lookup fails."""
    topics = java_broker_topics("DefaultCluster", "broker-c")
    topics["java-topic"] = TopicConfig("java-topic", 2, 2)
    body = bodies.encode_register_broker_body(topics, DataVersion(0, int(time.time() * 1000), 1), compressed=True)
    header = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-c",
        "brokerId": "0",
        "brokerAddr": "127.0.0.1:10941",
        "haServerAddr": "127.0.0.1:10942",
        "compressed": "true",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    async with await RemotingClient.connect("127.0.0.1", port) as client:
        answer = await client.request(RequestCode.REGISTER_BROKER, header, body)
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"REGISTER_BROKER of broker-c over remoting: code {answer.code} {answer.remark}")
        print(f"broker-c registered {len(topics)} topics ({len(topics) - 1} system topics and java-topic).")
        print("Over gRPC:")
        print_route("java-topic", await asyncio.to_thread(route, "java-topic"))
        print("\nOver RocketMQ remoting:")
        print(f"  {(await remoting_lookup(port, 'java-topic')).decode()}")
        print("\nbroker-c closes its connection: the NameServer removes it at once (S15).")


def reason(exc: BaseException) -> str:
    """What went wrong, never empty: the message, or the exception's type when it has none
    (``asyncio.wait_for`` raises a bare TimeoutError)."""
    return str(exc) or f"{type(exc).__name__} (no message)"


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    """Poll ``check`` every 0.1 s; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def main() -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes: dict[str, subprocess.Popen[str]] = {}
    with tempfile.TemporaryDirectory(prefix="namesrv-demo-") as tmp:
        try:
            namesrv = subprocess.Popen(
                [sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
                 "--kv-config-path", f"{tmp}/kvConfig.json", "--config-store-path", f"{tmp}/namesrv.properties"],
                stdout=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            processes["namesrv"] = namesrv
            assert namesrv.stdout is not None
            line = namesrv.stdout.readline().strip()
            print(line)
            if "boot success" not in line:
                raise RuntimeError("the NameServer did not start (see its messages above)")
            ports = parse_boot_line(line)
            address = f"127.0.0.1:{ports['gRPC']}"
            agents = {
                "broker-a master": ("broker-a.properties", "topics-quickstart.json", []),
                "broker-a slave": ("broker-a-s.properties", "topics-quickstart.json", ["--set", "listenPort=10921"]),
                "broker-b master": ("broker-b.properties", "topics-dev.json", ["--set", "listenPort=10931"]),
            }
            for name, (conf, topics, extra) in agents.items():
                processes[name] = subprocess.Popen(
                    [sys.executable, "-m", "broker_agent", "--broker-config", str(EXAMPLES / conf),
                     "--topics-json", str(EXAMPLES / topics), "--namesrv-addr", address,
                     "--set", "brokerIP1=127.0.0.1", *extra],
                    text=True, env=env,
                )  # fmt: skip
            with grpc.insecure_channel(address) as channel:
                stub = ns_grpc.NameServerServiceStub(channel)

                def route(topic: str) -> types_pb2.TopicRouteData | None:
                    try:
                        request = ns_pb2.PickupTopicRouteRequest(topic=topic)
                        response: ns_pb2.PickupTopicRouteResponse = stub.PickupTopicRoute(request, timeout=5)
                        return response.route
                    except grpc.RpcError:
                        return None

                def known_route(topic: str) -> types_pb2.TopicRouteData:
                    found = route(topic)
                    if found is None:
                        raise RuntimeError(f"PickupTopicRoute found no route of {topic}")
                    return found

                def broker_a_addrs() -> dict[int, str]:
                    r = route("TopicTest")
                    return dict(r.broker_datas[0].broker_addrs) if r and r.broker_datas else {}

                wait_for("broker-a master and slave", lambda: len(broker_a_addrs()) == 2)
                wait_for("broker-b", lambda: route("test_order_message_topic") is not None)
                print("\nOver gRPC (PickupTopicRoute on the gRPC port):")
                print_route("TopicTest", known_route("TopicTest"))
                print_route("TBW102", known_route("TBW102"))
                print(f"\nOver RocketMQ remoting (GET_ROUTEINFO_BY_TOPIC on port {ports['remoting']}), the body a")
                print("RocketMQ 5.x client, mqadmin or the Dashboard receives (clients before 4.9.4 get {0:...} keys):")
                print(f"  {asyncio.run(remoting_lookup(ports['remoting'], 'TopicTest')).decode()}")

                print("\nbroker-c registers over remoting as a Java broker does; java-topic on both doors:")
                asyncio.run(remoting_broker(ports["remoting"], known_route))
                wait_for("broker-c to leave", lambda: route("java-topic") is None, timeout=5)
                print("java-topic has no route any more.")

                print("\nStopping the broker-a slave (SIGTERM: it unregisters) ...")
                slave = processes.pop("broker-a slave")
                slave.send_signal(signal.SIGTERM)
                if slave.wait(15) != 0:
                    raise RuntimeError(f"broker-a slave agent exited {slave.returncode}")
                wait_for("the slave to leave the route", lambda: list(broker_a_addrs()) == [0])
                print("Over gRPC:")
                print_route("TopicTest", known_route("TopicTest"))
                print("\nOver RocketMQ remoting:")
                print(f"  {asyncio.run(remoting_lookup(ports['remoting'], 'TopicTest')).decode()}")
        except Exception as exc:  # any failure: its reason, once
            print(f"demo failed: {reason(exc)}", file=sys.stderr)
            return 1
        finally:
            print("\nStopping everything ...")
            codes = {}
            for name in [n for n in processes if n != "namesrv"] + ["namesrv"]:
                process = processes[name]
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                try:
                    codes[name] = process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    codes[name] = -9
        bad = {name: code for name, code in codes.items() if code != 0}
        if bad:
            print(f"demo failed: processes exited with {bad}", file=sys.stderr)
            return 1
    print("Demo finished: every process stopped cleanly.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
