"""``namesrv-snapshot``: snapshot any running NameServer through its public RPCs, into the same
Parquet layout the NameServer exports itself (:mod:`namesrv_grpc.snapshot`), so route tables of
several NameServers (ours, or ones someone else runs) can be compared by ``analytics``.

``GetBrokerClusterInfo`` gives brokerAddrTable and clusterAddrTable, ``GetAllTopicList`` the topics,
and one ``PickupTopicRoute`` per topic (``--concurrency`` at a time) their QueueData and filter
servers. A topic deleted in between (``NOT_FOUND``) is left out. The live columns of ``broker_data``
are null (no public RPC returns them), the manifest's ``source`` is ``rpc``, and ``snapshot_time`` is
when the collection started; the collection is not atomic, so a broker that changes meanwhile may
show half-changed. Several ``--namesrv`` are snapshotted at once, each with its own identity (its
address, or ``--namesrv-id`` for a single one).

Exit codes: 0 every snapshot written; 1 a NameServer failed (unreachable, warming up, ...) or a
snapshot could not be written (one stderr line each; the others are still written), or pyarrow is
not installed (the ``snapshots`` extra: one stderr line saying so, nothing is asked); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.client import security
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.errors import SnapshotsNotInstalledError
from namesrv_grpc.core.model import BrokerData, QueueData, TopicQueueMappingInfo
from namesrv_grpc.core.route_tables import RouteTableCopy, wall_clock_millis
from namesrv_grpc.grpc_api.convert import queue_data_from_proto
from namesrv_grpc.runtime.pipes import quiet_broken_pipe
from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.version import add_version_flag
from namesrv_grpc.wire.grpc_register_body import mapping_from_proto

if TYPE_CHECKING:  # namesrv_grpc.snapshot needs pyarrow (the snapshots extra): imported when used
    from namesrv_grpc.snapshot import SnapshotInfo

MAX_MESSAGE_BYTES = 256 * 1024 * 1024


async def collect_route_table(
    address: str, *, concurrency: int = 32, timeout: float = 30.0, client_security: ClientSecurity | None = None
) -> RouteTableCopy:
    """The route table of the NameServer at ``address`` through its public RPCs (TLS and signing
    as ``client_security`` says; plaintext by default).

    Raises grpc.aio.AioRpcError when a call other than a topic's ``NOT_FOUND`` fails.
    """
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    async with (client_security or ClientSecurity()).aio_channel(address, options) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        info = await stub.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=timeout)
        topics = (await stub.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=timeout)).topics
        topic_queue_table: dict[str, dict[str, QueueData]] = {}
        filter_servers: dict[str, tuple[str, ...]] = {}
        mappings: dict[str, dict[str, TopicQueueMappingInfo]] = {}
        semaphore = asyncio.Semaphore(concurrency)

        async def fetch(topic: str) -> None:
            async with semaphore:
                try:
                    response = await stub.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic), timeout=timeout)
                except grpc.aio.AioRpcError as error:
                    if error.code() == grpc.StatusCode.NOT_FOUND:
                        return  # deleted since GetAllTopicList
                    raise
            route = response.route
            topic_queue_table[topic] = {q.broker_name: queue_data_from_proto(q) for q in route.queue_datas}
            for addr, servers in route.filter_server_table.items():
                filter_servers[addr] = tuple(servers.filter_server_addrs)
            if route.topic_queue_mapping_by_broker:
                mappings[topic] = {b: mapping_from_proto(m) for b, m in route.topic_queue_mapping_by_broker.items()}

        await asyncio.gather(*(fetch(topic) for topic in topics))
    return RouteTableCopy(
        topic_queue_table=topic_queue_table,
        broker_addr_table={
            name: BrokerData(
                cluster=data.cluster,
                broker_name=data.broker_name or name,
                broker_addrs=dict(data.broker_addrs),
                zone_name=data.zone_name,
                enable_acting_master=data.enable_acting_master,
            )
            for name, data in info.broker_addr_table.items()
        },
        cluster_addr_table={c: frozenset(names.broker_names) for c, names in info.cluster_addr_table.items()},
        broker_live_table={},
        filter_server_table=filter_servers,
        topic_queue_mapping_info_table=mappings,
    )


async def snapshot_namesrv(
    address: str,
    out: Path,
    *,
    namesrv_id: str = "",
    concurrency: int = 32,
    timeout: float = 30.0,
    client_security: ClientSecurity | None = None,
) -> SnapshotInfo:
    """Collect the route table of ``address`` and commit it as one snapshot in ``out`` (its identity:
    ``namesrv_id``, default the address). Raises grpc.aio.AioRpcError, OSError,
    SnapshotsNotInstalledError (no pyarrow)."""
    from namesrv_grpc.snapshot import commit_snapshot, recover, tables_from_copy

    identity = namesrv_id or address
    started = wall_clock_millis()
    copy = await collect_route_table(address, concurrency=concurrency, timeout=timeout, client_security=client_security)
    tables = tables_from_copy(copy, snapshot_time_ms=started, namesrv=identity, source="rpc")

    def write() -> SnapshotInfo:
        recover(out, identity)
        return commit_snapshot(out, tables)

    return await asyncio.to_thread(write)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="namesrv-snapshot",
        description="Snapshot NameServers' route tables through their public RPCs, as Parquet for analytics/.",
    )
    add_version_flag(parser)
    parser.add_argument(
        "--namesrv",
        "-n",
        action="append",
        required=True,
        metavar="HOST:PORT",
        help="a NameServer; repeat (or separate with ';') to snapshot several at once",
    )
    parser.add_argument("--out", "-o", required=True, type=Path, help="snapshot directory (created when missing)")
    parser.add_argument("--namesrv-id", default="", help="identity in the snapshot (one --namesrv only; default: it)")
    parser.add_argument("--concurrency", type=int, default=32, help="route lookups in flight (default 32)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    security.add_arguments(parser)
    return parser


async def _run(args: argparse.Namespace, addresses: list[str], client_security: ClientSecurity) -> int:
    from namesrv_grpc.snapshot import SnapshotInfo

    results = await asyncio.gather(
        *(
            snapshot_namesrv(
                address,
                args.out,
                namesrv_id=args.namesrv_id,
                concurrency=args.concurrency,
                timeout=args.timeout,
                client_security=client_security,
            )
            for address in addresses
        ),
        return_exceptions=True,
    )
    code = 0
    for address, result in zip(addresses, results, strict=True):
        if isinstance(result, SnapshotInfo):
            partition = f"snapshot_date={result.snapshot_date}"
            print(
                f"{address}: {result.topics} topics, {result.broker_addrs} broker addresses -> "
                f"{result.directory}/*/{partition}/{result.file_name}",
                flush=True,
            )
        elif isinstance(result, grpc.aio.AioRpcError):
            print(f"namesrv-snapshot: {address}: {result.code().name}: {result.details()}", file=sys.stderr)
            code = 1
        elif isinstance(result, OSError):
            print(f"namesrv-snapshot: {address}: cannot write into {args.out}: {result}", file=sys.stderr)
            code = 1
        else:
            raise result
    return code


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    addresses = list(dict.fromkeys(a.strip() for entry in args.namesrv for a in entry.split(";") if a.strip()))
    if args.namesrv_id and len(addresses) != 1:
        parser.error("--namesrv-id needs exactly one --namesrv")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    try:
        client_security = security.security_from_args(args)
    except ConfigError as exc:
        print(f"namesrv-snapshot: {exc}", file=sys.stderr)
        return 2
    try:
        import namesrv_grpc.snapshot  # noqa: F401  (pyarrow, before any NameServer is asked)
    except SnapshotsNotInstalledError as exc:
        print(f"namesrv-snapshot: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(_run(args, addresses, client_security))


if __name__ == "__main__":
    raise SystemExit(main())
