"""Simulated brokers for the fault tests: ``python -m tests.sim_brokers ADDR FIRST COUNT``.

Registers brokers ``sim-FIRST`` … ``sim-(FIRST+COUNT-1)`` (each a master at 127.0.0.1:(20000+i) with one
topic ``sim-topic-i``) with the NameServer at ADDR, opens a liveness session for each, prints
``ready COUNT`` once every session is accepted, then heartbeats until killed.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.wire.grpc_register_body import encode_body

CLUSTER = "SimCluster"


def broker(i: int) -> tuple[str, str]:
    """Broker name and address of simulated broker ``i``."""
    return f"sim-{i}", f"127.0.0.1:{20000 + i}"


async def one_broker(stub: ns_grpc.NameServerServiceStub, i: int, accepted: asyncio.Queue[int]) -> None:
    name, addr = broker(i)
    body, crc = encode_body({f"sim-topic-{i}": TopicConfig(f"sim-topic-{i}", 4, 4)}, DataVersion(0, 1, 1))
    hello = ns_pb2.SessionHello(
        cluster_name=CLUSTER, broker_name=name, broker_id=0, broker_addr=addr, instance_id=f"sim-{i}"
    )
    request = ns_pb2.RegisterBrokerRequest(
        cluster_name=CLUSTER, broker_name=name, broker_id=0, broker_addr=addr, instance_id=f"sim-{i}"
    )
    request.body, request.body_crc32c = body, crc
    await stub.RegisterBroker(request, timeout=30)
    call = stub.OpenBrokerSession()
    await call.write(ns_pb2.OpenBrokerSessionRequest(hello=hello))
    response = await call.read()
    if response.WhichOneof("kind") != "accepted":
        raise RuntimeError(f"session of {name} not accepted: {response}")
    await accepted.put(i)
    while True:
        await asyncio.sleep(5)
        await call.write(ns_pb2.OpenBrokerSessionRequest(heartbeat=ns_pb2.SessionHeartbeat()))


async def main(addr: str, first: int, count: int) -> None:
    accepted: asyncio.Queue[int] = asyncio.Queue()
    # One connection per 50 sessions: a session is a stream open for good, and a connection takes at
    # most grpcMaxConcurrentStreams (100) of them; a local subchannel pool per channel, or gRPC would
    # put every channel to the same address on one connection.
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(addr, options=options) for _ in range(max(1, -(-count // 50)))]
    stubs = [ns_grpc.NameServerServiceStub(c) for c in channels]
    semaphore = asyncio.Semaphore(50)

    async def start(i: int) -> None:
        async with semaphore:
            task = asyncio.create_task(one_broker(stubs[i % len(stubs)], i, accepted))
            tasks.append(task)
            await accepted.get()

    tasks: list[asyncio.Task[None]] = []
    await asyncio.gather(*(start(i) for i in range(first, first + count)))
    print(f"ready {count}", flush=True)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
