"""``make demo``: a NameServer and three broker agents from the real broker files in examples/.

1. Start a NameServer on a free loopback port (built-in defaults, state in a temporary directory).
2. Start broker agents for broker-a master, broker-a slave (listenPort 10921) and broker-b master
   (listenPort 10931), all with brokerIP1=127.0.0.1.
3. Print the route of TopicTest: its queue data and its brokers with master and slave addresses,
   looked up over gRPC and over RocketMQ's remoting protocol (as every RocketMQ client does it).
4. A broker registers over remoting as a Java broker does (REGISTER_BROKER); its topic is looked up
   over gRPC. One table, two protocols.
5. Stop the slave (SIGTERM: it unregisters) and show the route without it.
6. Stop everything with SIGTERM and check that every process exited 0.

Exit code 0 when all of that happened; 1 with the reason otherwise.
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
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.remoting import bodies
from namesrv_grpc.remoting.client import RemotingClient
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode

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


async def remoting_broker(port: int, stop: asyncio.Event, registered: asyncio.Event) -> None:
    """broker-c registers over remoting exactly as a Java broker does, and stays connected until ``stop``."""
    body = bodies.encode_register_broker_body(
        {"java-topic": TopicConfig("java-topic", 2, 2)}, DataVersion(0, int(time.time() * 1000), 1), compressed=True
    )
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
            raise RuntimeError(f"REGISTER_BROKER over remoting: code {answer.code} {answer.remark}")
        registered.set()
        await stop.wait()


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

                def broker_a_addrs() -> dict[int, str]:
                    r = route("TopicTest")
                    return dict(r.broker_datas[0].broker_addrs) if r and r.broker_datas else {}

                wait_for("broker-a master and slave", lambda: len(broker_a_addrs()) == 2)
                wait_for("broker-b", lambda: route("test_order_message_topic") is not None)
                print("\nOver gRPC (PickupTopicRoute on the gRPC port):")
                print_route("TopicTest", route("TopicTest"))  # type: ignore[arg-type]
                print_route("TBW102", route("TBW102"))  # type: ignore[arg-type]
                print(f"\nOver RocketMQ remoting (GET_ROUTEINFO_BY_TOPIC on port {ports['remoting']}), the body a")
                print("RocketMQ 5.x client, mqadmin or the Dashboard receives (clients before 4.9.4 get {0:...} keys):")
                print(f"  {asyncio.run(remoting_lookup(ports['remoting'], 'TopicTest')).decode()}")

                print("\nbroker-c registers over remoting as a Java broker does; its topic over gRPC:")
                loop = asyncio.new_event_loop()
                stop_broker_c, broker_c_registered = asyncio.Event(), asyncio.Event()
                broker_c = loop.create_task(remoting_broker(ports["remoting"], stop_broker_c, broker_c_registered))
                loop.run_until_complete(asyncio.wait_for(broker_c_registered.wait(), 10))
                print_route("java-topic", route("java-topic"))  # type: ignore[arg-type]
                print("broker-c closes its connection: the NameServer removes it at once (S15).")
                stop_broker_c.set()
                loop.run_until_complete(broker_c)
                loop.close()
                wait_for("broker-c to leave", lambda: route("java-topic") is None, timeout=5)
                print("java-topic has no route any more.")

                print("\nStopping the broker-a slave (SIGTERM: it unregisters) ...")
                slave = processes.pop("broker-a slave")
                slave.send_signal(signal.SIGTERM)
                if slave.wait(15) != 0:
                    raise RuntimeError(f"broker-a slave agent exited {slave.returncode}")
                wait_for("the slave to leave the route", lambda: list(broker_a_addrs()) == [0])
                print_route("TopicTest", route("TopicTest"))  # type: ignore[arg-type]
        except (TimeoutError, RuntimeError, OSError, ValueError) as exc:
            print(f"demo failed: {exc}", file=sys.stderr)
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
