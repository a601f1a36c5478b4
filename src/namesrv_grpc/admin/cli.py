"""``namesrv-admin``: ask and change the NameServers from the shell, as RocketMQ's ``mqadmin`` does
(``topicRoute``, ``clusterList``, ``updateKvConfig``, ``wipeWritePerm``, ...).

``-n "host:port;host:port"`` (or ``NAMESRV_ADDR``; default ``127.0.0.1:8081``, the gRPC port) names
every NameServer of the cluster, as ``mqadmin -n`` does. Each address speaks RocketMQ remoting (any
NameServer, Java or ours: ``remoting://host:9876``) or gRPC (namesrv-grpc: ``grpc://host:8081``);
without a prefix the protocol is detected on the port (:mod:`namesrv_grpc.admin.readers`). Reads,
changes and ``compare`` work over both; ``snapshot`` and ``watch`` are namesrv-grpc's gRPC API:

- reads (``route``, ``clusters``, ``topics``, ``kv-get``, ``kv-list``, ``config`` without changes)
  ask the first NameServer that answers (one that cannot be reached or does not answer within
  ``--timeout`` is skipped, with a note on stderr); ``--each`` asks every NameServer instead and
  prints each one's answer under its address, to compare them;
- changes (``wipe-write-perm``, ``add-write-perm``, ``delete-topic``, ``kv-put``, ``kv-delete``,
  ``config KEY=VALUE``, ``snapshot``) go to every NameServer at once, since NameServers never share
  state (docs/rules.md S27); one result line per NameServer, in ``-n`` order.

Reads print JSON (protobuf field names) on stdout, whichever the protocol; ``clusters`` prints a
table (``--json`` for JSON). ``route TOPIC --format mqadmin`` and ``clusters --format mqadmin`` print
what ``mqadmin topicRoute`` / ``clusterList`` print (:mod:`namesrv_grpc.admin.formats`).
``watch TOPIC...`` follows route changes on every NameServer (:mod:`namesrv_grpc.admin.watch`).
``compare`` tells whether every NameServer says the same (:mod:`namesrv_grpc.admin.compare`; exit
codes 0 same, 1 different, 2 could not compare, as ``diff``'s; 3 no broker on any NameServer).

An address that is not a NameServer port of the protocol in use (a broker's port, an HTTP port, the
other protocol's port) is named as such, whatever the command (:class:`admin_readers.WrongPortError`);
commas between addresses are refused with the separator to use (``;``).

Exit codes: 0 on success; 1 when a read got an error or no NameServer answered, when a change
failed on any NameServer, or when ``wipe-write-perm``/``add-write-perm`` found the broker name on
no NameServer (nothing changed anywhere: a typo?); 2 for bad arguments; 141 when stdout was closed
(``| head``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.admin import readers as admin_readers
from namesrv_grpc.admin.compare import MAX_CONCURRENCY, add_compare_parser, run_compare
from namesrv_grpc.admin.formats import mqadmin_cluster_list, mqadmin_route
from namesrv_grpc.admin.readers import Endpoint, ReadError, parse_endpoint
from namesrv_grpc.admin.watch import add_watch_parser, run_watch
from namesrv_grpc.client import security
from namesrv_grpc.grpc_api.convert import cluster_info_to_proto, route_to_proto
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.runtime.pipes import quiet_broken_pipe
from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.version import add_version_flag
from namesrv_grpc.wire import bodies

DEFAULT_NAMESRV = "127.0.0.1:8081"
"""The gRPC port of a local NameServer (grpcServerPort)."""
TIMEOUT_SECONDS = 10.0
SNAPSHOT_TIMEOUT_SECONDS = 600.0
NOT_ANSWERING = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
"""Status codes that mean "this NameServer did not answer": a read then asks the next one."""

READS = ("route", "clusters", "topics", "kv-get", "kv-list", "config")
"""Commands that only read (``config`` with KEY=VALUE arguments is a change)."""


def to_json(message: Message | dict[str, Any]) -> str:
    """A message (or a dict of messages) as indented JSON with the .proto field names, defaults included."""

    def convert(m: Message) -> dict[str, Any]:
        return MessageToDict(m, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)

    value = {k: convert(v) for k, v in message.items()} if isinstance(message, dict) else convert(message)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def parse_endpoints(text: str) -> list[Endpoint]:
    """Split ``host:port;remoting://host:port;grpc://host:port`` (blanks and empty items ignored,
    duplicates dropped); raise ValueError naming the bad item, or when nothing is left."""
    endpoints: list[Endpoint] = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            endpoint = parse_endpoint(item)
        except ValueError as exc:
            raise ValueError(f"{item!r}: {exc}") from None
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    if not endpoints:
        raise ValueError(f"{text!r} names no NameServer (expected host:port;host:port)")
    return endpoints


def parse_namesrv_list(text: str) -> list[str]:
    """:func:`parse_endpoints` as text (``remoting://`` and ``grpc://`` prefixes kept)."""
    return [str(e) for e in parse_endpoints(text)]


def build_parser() -> argparse.ArgumentParser:
    """Global options and one sub-command per operation."""
    parser = argparse.ArgumentParser(
        prog="namesrv-admin",
        description="Query and manage the NameServers (namesrv-grpc). Reads ask the first NameServer that "
        "answers; changes go to every NameServer.",
    )
    add_version_flag(parser)
    parser.add_argument(
        "--namesrv",
        "-n",
        default=os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV,
        help='NameServers "host:port;host:port": remoting ports (9876, Java or namesrv-grpc) or gRPC ports '
        "(8081, namesrv-grpc), detected on each port; or name the protocol: remoting://host:port, "
        f"grpc://host:port. Reads and compare work over both; changes, snapshot and watch need gRPC. "
        f"Default: NAMESRV_ADDR, else {DEFAULT_NAMESRV}",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"deadline of each call (default {TIMEOUT_SECONDS:g}; snapshot: {SNAPSHOT_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--each", action="store_true", help="reads: ask every NameServer and print each answer (to compare them)"
    )
    security.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    route = sub.add_parser("route", help="route of a topic (PickupTopicRoute / GET_ROUTEINFO_BY_TOPIC)")
    route.add_argument("topic")
    route.add_argument(
        "--format",
        choices=("json", "mqadmin"),
        default="json",
        help="json: protobuf field names (default); mqadmin: what mqadmin topicRoute prints (RocketMQ's camelCase)",
    )
    clusters = sub.add_parser(
        "clusters", help="brokers per cluster with their liveness (GetBrokerClusterInfo, GetBrokerLiveTable)"
    )
    clusters.add_argument("--json", action="store_true", help="print both answers as JSON instead of a table")
    clusters.add_argument(
        "--format",
        choices=("table", "json", "mqadmin"),
        default="table",
        help="table (default), json (as --json), or mqadmin: the table of mqadmin clusterList (broker "
        "statistics columns as mqadmin prints them for a broker it cannot reach: a NameServer does not know them)",
    )
    topics = sub.add_parser("topics", help="all topics, or one cluster's (GetAllTopicList / GetTopicsByCluster)")
    topics.add_argument("--cluster", default="")
    for name, rpc in (("kv-get", "GetKVConfig"), ("kv-delete", "DeleteKVConfig, on every NameServer")):
        p = sub.add_parser(name, help=f"{name.replace('-', ' ')} one KV config value ({rpc})")
        p.add_argument("namespace")
        p.add_argument("key")
    put = sub.add_parser("kv-put", help="set one KV config value on every NameServer (PutKVConfig)")
    put.add_argument("namespace")
    put.add_argument("key")
    put.add_argument("value")
    sub.add_parser("kv-list", help="one KV namespace (GetKVListByNamespace)").add_argument("namespace")
    sub.add_parser(
        "wipe-write-perm", help="clear the write permission of a broker name on every NameServer"
    ).add_argument("broker_name")
    sub.add_parser("add-write-perm", help="give a broker name write permission back on every NameServer").add_argument(
        "broker_name"
    )
    delete = sub.add_parser("delete-topic", help="delete a topic's route on every NameServer (DeleteTopic)")
    delete.add_argument("topic")
    delete.add_argument("--cluster", default="", help="only from this cluster's broker names")
    sub.add_parser(
        "snapshot", help="every NameServer exports a route snapshot into its snapshotDir (ExportRouteSnapshot)"
    )
    config = sub.add_parser(
        "config", help="show the config (first NameServer), or change keys on every NameServer: config KEY=VALUE ..."
    )
    config.add_argument("changes", nargs="*", metavar="KEY=VALUE")
    add_watch_parser(sub)
    add_compare_parser(sub)
    return parser


def open_channel(address: str, args: argparse.Namespace) -> grpc.Channel:
    """The one place a channel to a NameServer is made: TLS and signatures as the security flags say
    (``args.client_security``, set by :func:`main`; plaintext and unsigned when absent)."""
    client_security: security.ClientSecurity = getattr(args, "client_security", None) or security.ClientSecurity()
    return client_security.channel(address)


@dataclass(frozen=True)
class Outcome:
    """What one NameServer answered: the response, or the error (``CODE: details``)."""

    address: str
    response: Message | dict[str, Message] | None = None
    error: str | None = None
    answered: bool = True
    """False when the NameServer could not be reached or did not answer in time."""
    protocol: str = "grpc"
    wrong_port: bool = False
    """The address is not a NameServer port of that protocol (``error`` says what it is instead)."""


Call = Callable[[grpc.Channel], "Message | dict[str, Message]"]


def _stubs(channel: grpc.Channel) -> tuple[Any, Any, Any]:
    return (
        ns_grpc.NameServerServiceStub(channel),
        kv_grpc.KVConfigServiceStub(channel),
        admin_grpc.AdminServiceStub(channel),
    )


def _read_call(args: argparse.Namespace) -> Call:
    t = args.timeout

    def call(channel: grpc.Channel) -> Message | dict[str, Message]:
        ns, kv, admin = _stubs(channel)
        request: Message
        command = args.command
        if command == "route":
            return cast(Message, ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=args.topic), timeout=t))
        if command == "clusters":
            info = ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=t)
            try:
                live = admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=t)
            except grpc.RpcError as error:
                if cast(grpc.Call, error).code() in NOT_ANSWERING:
                    raise
                live = None  # an older NameServer, or no permission: the table without liveness
            return {"cluster_info": info} | ({"live_table": live} if live is not None else {})
        if command == "topics":
            if args.cluster:
                request = ns_pb2.GetTopicsByClusterRequest(cluster_name=args.cluster)
                return cast(Message, ns.GetTopicsByCluster(request, timeout=t))
            return cast(Message, ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=t))
        if command == "kv-get":
            request = kv_pb2.GetKVConfigRequest(namespace=args.namespace, key=args.key)
            return cast(Message, kv.GetKVConfig(request, timeout=t))
        if command == "kv-list":
            request = kv_pb2.GetKVListByNamespaceRequest(namespace=args.namespace)
            return cast(Message, kv.GetKVListByNamespace(request, timeout=t))
        if command == "config":
            return cast(Message, admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=t))
        raise AssertionError(command)

    return call


def _change_call(args: argparse.Namespace) -> Call:
    t = args.timeout

    def call(channel: grpc.Channel) -> Message:
        _ns, kv, admin = _stubs(channel)
        request: Message
        command = args.command
        if command == "wipe-write-perm":
            request = admin_pb2.WipeWritePermOfBrokerRequest(broker_name=args.broker_name)
            return cast(Message, admin.WipeWritePermOfBroker(request, timeout=t))
        if command == "add-write-perm":
            request = admin_pb2.AddWritePermOfBrokerRequest(broker_name=args.broker_name)
            return cast(Message, admin.AddWritePermOfBroker(request, timeout=t))
        if command == "delete-topic":
            request = admin_pb2.DeleteTopicRequest(topic=args.topic, cluster_name=args.cluster)
            return cast(Message, admin.DeleteTopic(request, timeout=t))
        if command == "kv-put":
            request = kv_pb2.PutKVConfigRequest(namespace=args.namespace, key=args.key, value=args.value)
            return cast(Message, kv.PutKVConfig(request, timeout=t))
        if command == "kv-delete":
            request = kv_pb2.DeleteKVConfigRequest(namespace=args.namespace, key=args.key)
            return cast(Message, kv.DeleteKVConfig(request, timeout=t))
        if command == "config":
            changes = dict(c.split("=", 1) for c in args.changes)
            return cast(
                Message, admin.UpdateNamesrvConfig(admin_pb2.UpdateNamesrvConfigRequest(config=changes), timeout=t)
            )
        if command == "snapshot":
            timeout = max(t, SNAPSHOT_TIMEOUT_SECONDS)
            return cast(Message, admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=timeout))
        raise AssertionError(command)

    return call


def _ask(address: str, args: argparse.Namespace, call: Call) -> Outcome:
    with open_channel(address, args) as channel:
        try:
            return Outcome(address, response=call(channel))
        except grpc.RpcError as error:
            code = cast(grpc.Call, error).code()
            details = cast(grpc.Call, error).details()
            return Outcome(address, error=f"{code.name}: {details}", answered=code not in NOT_ANSWERING)


async def _remoting_read(reader: admin_readers.NamesrvReader, args: argparse.Namespace) -> Message | dict[str, Message]:
    """A read over remoting, answered in the messages the gRPC API answers with (same output)."""
    command = args.command
    if command == "route":
        route = await reader.route(args.topic)
        if route is None:
            raise ReadError(reader.address, f"TOPIC_NOT_EXIST: no route for topic {args.topic!r}", answered=True)
        return ns_pb2.PickupTopicRouteResponse(route=route_to_proto(route))
    if command == "clusters":
        return {"cluster_info": cluster_info_to_proto(await reader.cluster_info())}
    if command == "topics":
        topics = await reader.topic_list(args.cluster)
        if args.cluster:
            return ns_pb2.GetTopicsByClusterResponse(topics=topics)
        return ns_pb2.GetAllTopicListResponse(topics=topics)
    if command == "kv-get":
        value = await reader.kv_get(args.namespace, args.key)
        if value is None:
            message = f"QUERY_NOT_FOUND: no KV config {args.namespace}/{args.key}"
            raise ReadError(reader.address, message, answered=True)
        return kv_pb2.GetKVConfigResponse(value=value)
    if command == "kv-list":
        return kv_pb2.GetKVListByNamespaceResponse(table=await reader.kv_list(args.namespace) or {})
    if command == "config":
        return admin_pb2.GetNamesrvConfigResponse(config=await reader.config())
    raise AssertionError(command)


def _failed(name: str, error: ReadError) -> Outcome:
    return Outcome(
        name,
        error=error.message,
        answered=error.answered,
        protocol="remoting",
        wrong_port=isinstance(error, admin_readers.WrongPortError),
    )


def _grpc_only(args: argparse.Namespace) -> str | None:
    """The command when only namesrv-grpc's gRPC API carries it (``snapshot``, ``watch``), else None."""
    return None if args.command in READS or args.command in REMOTING_CHANGES else str(args.command)


def _explained(endpoint: Endpoint, args: argparse.Namespace, outcome: Outcome) -> Outcome:
    """A gRPC call that found no gRPC server (UNAVAILABLE): when the port is not a NameServer's gRPC
    port, say what it is instead (a remoting port, a broker's port, an HTTP port:
    :func:`admin_readers.wrong_port`)."""
    if outcome.answered or not (outcome.error or "").startswith("UNAVAILABLE"):
        return outcome
    wrong = admin_readers.run(
        admin_readers.wrong_port(
            endpoint.address, args.client_security, args.timeout, wanted="grpc", grpc_only=_grpc_only(args)
        )
    )
    if wrong is None:
        return outcome
    return Outcome(outcome.address, error=wrong.message, answered=False, wrong_port=True)


def _read_one(endpoint: Endpoint, args: argparse.Namespace) -> Outcome:
    """One read from one NameServer, over the protocol its address names or its port speaks."""
    name = str(endpoint)
    if endpoint.protocol == "grpc":
        return _explained(endpoint, args, _ask(endpoint.address, args, _read_call(args)))

    async def over_remoting() -> Outcome | None:
        try:
            reader = await admin_readers.open_reader(endpoint, args.client_security, args.timeout)
        except ReadError as exc:
            return _failed(name, exc)
        try:
            if reader.protocol == "grpc":
                return None
            return Outcome(name, response=await _remoting_read(reader, args), protocol="remoting")
        except ReadError as exc:
            return _failed(name, exc)
        finally:
            await reader.close()

    outcome = admin_readers.run(over_remoting())
    if outcome is None:  # the port speaks gRPC
        outcome = _explained(endpoint, args, _ask(endpoint.address, args, _read_call(args)))
        return Outcome(name, outcome.response, outcome.error, outcome.answered, wrong_port=outcome.wrong_port)
    return cast(Outcome, outcome)


# ---------------------------------------------------------------------------------------------- output


def _age(millis: int) -> str:
    if millis < 10_000:
        return f"{millis / 1000:.1f}s"
    if millis < 3_600_000:
        return f"{millis // 1000}s"
    return f"{millis / 3_600_000:.1f}h"


PROTOCOL_NAMES = {admin_pb2.REGISTRATION_PROTOCOL_GRPC: "grpc", admin_pb2.REGISTRATION_PROTOCOL_REMOTING: "remoting"}


def cluster_table(info: ns_pb2.GetBrokerClusterInfoResponse, live: admin_pb2.GetBrokerLiveTableResponse | None) -> str:
    """One row per broker address: cluster, broker name, id, address, and from the live table the
    protocol that registered it, whether a session guards it, time since last heard (AGE), heartbeat
    timeout and DataVersion (``stateVersion/timestamp/counter``). Without a live table those
    columns show ``-``."""
    entries = {e.broker_addr: e for e in live.brokers} if live is not None else {}
    header = ("CLUSTER", "BROKER NAME", "ID", "ADDRESS", "PROTOCOL", "SESSION", "AGE", "TIMEOUT", "DATA VERSION")
    rows: list[tuple[str, ...]] = []
    for cluster in sorted(info.cluster_addr_table):
        for broker_name in sorted(info.cluster_addr_table[cluster].broker_names):
            broker_data = info.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            for broker_id in sorted(broker_data.broker_addrs):
                addr = broker_data.broker_addrs[broker_id]
                entry = entries.get(addr)
                if entry is None:
                    liveness: tuple[str, ...] = ("-",) * 5
                else:
                    v = entry.data_version
                    liveness = (
                        PROTOCOL_NAMES.get(entry.protocol, "?"),
                        "yes" if entry.session else "no",
                        _age(entry.age_millis),
                        _age(entry.heartbeat_timeout_millis),
                        f"{v.state_version}/{v.timestamp}/{v.counter}",
                    )
                rows.append((cluster, broker_name, str(broker_id), addr, *liveness))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    if not rows:
        lines.append("(no broker registered)")
    return "\n".join(lines)


def _render_read(args: argparse.Namespace, outcome: Outcome) -> str:
    response = outcome.response
    assert response is not None
    if args.command == "route" and args.format == "mqadmin":
        route = cast(ns_pb2.PickupTopicRouteResponse, response).route
        return mqadmin_route(admin_readers.route_from_proto(route))
    if args.command == "clusters":
        assert isinstance(response, dict)
        info = cast(ns_pb2.GetBrokerClusterInfoResponse, response["cluster_info"])
        if args.format == "mqadmin":
            return mqadmin_cluster_list(admin_readers.cluster_info_from_proto(info))
        if not args.json and args.format != "json":
            live = response.get("live_table")
            table = cluster_table(info, cast(Any, live))
            if outcome.protocol == "remoting":
                table += "\n(liveness columns: only namesrv-grpc's gRPC API has a live table, not RocketMQ remoting)"
            elif live is None:
                table += "\n(liveness columns need AdminService.GetBrokerLiveTable, which this NameServer refused)"
            return table
    return to_json(response)


def _change_line(args: argparse.Namespace, outcome: Outcome) -> tuple[str, bool]:
    """The result line of a change on one NameServer, and whether it changed something there."""
    if outcome.error is not None:
        return f"{outcome.address}: FAILED {outcome.error}", False
    response: Any = outcome.response
    command = args.command
    if command in ("wipe-write-perm", "add-write-perm"):
        count = response.wipe_topic_count if command == "wipe-write-perm" else response.add_topic_count
        if count == 0:
            return (
                f"{outcome.address}: NOT FOUND broker name {args.broker_name!r} has no topic on this NameServer "
                "(not registered here?); nothing changed",
                False,
            )
        what = "write permission wiped" if command == "wipe-write-perm" else "write permission added"
        return f"{outcome.address}: OK {what}: {count} topics of {args.broker_name}", True
    if command == "snapshot":
        return (
            f"{outcome.address}: OK snapshot of {response.namesrv}: {response.file_name} in {response.snapshot_dir} "
            f"({response.topics} topics, {response.broker_addrs} broker addresses)",
            True,
        )
    done = {
        "delete-topic": f"topic {getattr(args, 'topic', '')} deleted",
        "kv-put": f"{getattr(args, 'namespace', '')}/{getattr(args, 'key', '')} set",
        "kv-delete": f"{getattr(args, 'namespace', '')}/{getattr(args, 'key', '')} deleted",
        "config": "config updated: " + " ".join(getattr(args, "changes", [])),
    }[command]
    return f"{outcome.address}: OK {done}", True


def _run_read(args: argparse.Namespace, endpoints: list[Endpoint]) -> int:
    if args.each:
        code = 0
        with ThreadPoolExecutor(max_workers=min(16, len(endpoints))) as pool:
            outcomes = list(pool.map(lambda endpoint: _read_one(endpoint, args), endpoints))
        for outcome in outcomes:
            print(f"== {outcome.address}")
            if outcome.error is not None:
                print(f"FAILED {outcome.error}")
                code = 1
            else:
                print(_render_read(args, outcome))
        return code
    for endpoint in endpoints:
        outcome = _read_one(endpoint, args)
        if outcome.error is None:
            print(_render_read(args, outcome))
            return 0
        if outcome.wrong_port:
            print(f"namesrv-admin: {outcome.error}", file=sys.stderr)
            continue
        if outcome.answered:
            print(f"namesrv-admin: {outcome.address}: {outcome.error}", file=sys.stderr)
            return 1
        print(f"namesrv-admin: {outcome.address} did not answer ({outcome.error})", file=sys.stderr)
    print(f"namesrv-admin: no NameServer answered ({';'.join(str(e) for e in endpoints)})", file=sys.stderr)
    return 1


REMOTING_CHANGES = ("wipe-write-perm", "add-write-perm", "delete-topic", "kv-put", "kv-delete", "config")
"""Changes that RocketMQ remoting can carry (any NameServer); ``snapshot`` and ``watch`` are gRPC only."""


async def _remoting_change(reader: admin_readers.RemotingReader, args: argparse.Namespace) -> Message:
    """A change over remoting, answered in the message the gRPC API answers with (same output)."""
    command = args.command
    if command in ("wipe-write-perm", "add-write-perm"):
        wipe = command == "wipe-write-perm"
        code = RequestCode.WIPE_WRITE_PERM_OF_BROKER if wipe else RequestCode.ADD_WRITE_PERM_OF_BROKER
        answer = await reader.change(code, {"brokerName": args.broker_name})
        count = int(answer.ext_fields.get("wipeTopicCount" if wipe else "addTopicCount", "0") or 0)
        if wipe:
            return admin_pb2.WipeWritePermOfBrokerResponse(wipe_topic_count=count)
        return admin_pb2.AddWritePermOfBrokerResponse(add_topic_count=count)
    if command == "delete-topic":
        fields = {"topic": args.topic, **({"clusterName": args.cluster} if args.cluster else {})}
        await reader.change(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields)
        return admin_pb2.DeleteTopicResponse()
    if command == "kv-put":
        fields = {"namespace": args.namespace, "key": args.key, "value": args.value}
        await reader.change(RequestCode.PUT_KV_CONFIG, fields)
        return kv_pb2.PutKVConfigResponse()
    if command == "kv-delete":
        await reader.change(RequestCode.DELETE_KV_CONFIG, {"namespace": args.namespace, "key": args.key})
        return kv_pb2.DeleteKVConfigResponse()
    if command == "config":
        body = bodies.encode_namesrv_config(dict(c.split("=", 1) for c in args.changes))
        await reader.change(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
        return admin_pb2.UpdateNamesrvConfigResponse()
    raise AssertionError(command)


def _change_one(endpoint: Endpoint, args: argparse.Namespace) -> Outcome:
    """One change on one NameServer, over the protocol its address names or its port speaks."""
    name = str(endpoint)
    if endpoint.protocol == "grpc" or args.command not in REMOTING_CHANGES:
        return _explained(endpoint, args, _ask(endpoint.address, args, _change_call(args)))

    async def over_remoting() -> Outcome | None:
        try:
            reader = await admin_readers.open_reader(endpoint, args.client_security, args.timeout)
        except ReadError as exc:
            return _failed(name, exc)
        try:
            if not isinstance(reader, admin_readers.RemotingReader):
                return None
            return Outcome(name, response=await _remoting_change(reader, args), protocol="remoting")
        except ReadError as exc:
            return _failed(name, exc)
        finally:
            await reader.close()

    outcome = admin_readers.run(over_remoting())
    if outcome is None:  # the port speaks gRPC
        outcome = _explained(endpoint, args, _ask(endpoint.address, args, _change_call(args)))
        return Outcome(name, outcome.response, outcome.error, outcome.answered, wrong_port=outcome.wrong_port)
    return cast(Outcome, outcome)


def _wrong_ports(endpoints: list[Endpoint], args: argparse.Namespace) -> list[admin_readers.WrongPortError | None]:
    """:func:`admin_readers.wrong_port` of every endpoint (for gRPC), at once."""

    async def check() -> list[admin_readers.WrongPortError | None]:
        return list(
            await asyncio.gather(
                *(
                    admin_readers.wrong_port(
                        e.address, args.client_security, args.timeout, wanted="grpc", grpc_only=_grpc_only(args)
                    )
                    for e in endpoints
                )
            )
        )

    return cast(list[admin_readers.WrongPortError | None], admin_readers.run(check()))


def _run_change(args: argparse.Namespace, endpoints: list[Endpoint]) -> int:
    with ThreadPoolExecutor(max_workers=min(16, len(endpoints))) as pool:
        outcomes = list(pool.map(lambda endpoint: _change_one(endpoint, args), endpoints))
    changed_somewhere = False
    for outcome in outcomes:
        line, changed = _change_line(args, outcome)
        print(line)
        changed_somewhere = changed_somewhere or changed
    if any(o.error is not None for o in outcomes):
        return 1
    if args.command in ("wipe-write-perm", "add-write-perm") and not changed_somewhere:
        print(f"namesrv-admin: broker name {args.broker_name!r} is known to no NameServer", file=sys.stderr)
        return 1
    return 0


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run one command against the NameServers of ``-n``; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        endpoints = parse_endpoints(args.namesrv)
    except ValueError as exc:
        parser.error(f"-n/--namesrv (or NAMESRV_ADDR): {exc}")
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    if args.command == "config" and any("=" not in c for c in args.changes):
        parser.error("config changes must be KEY=VALUE")
    try:
        args.client_security = security.security_from_args(args)
    except ConfigError as exc:
        print(f"namesrv-admin: {exc}", file=sys.stderr)
        return 2
    if args.command == "compare":
        if args.each:
            parser.error("--each is for reads; compare reads every NameServer anyway")
        if not 1 <= args.concurrency <= MAX_CONCURRENCY:
            parser.error(f"--concurrency must be 1..{MAX_CONCURRENCY}")
        if args.recheck_after < 0:
            parser.error("--recheck-after must be >= 0")
        return run_compare(args, endpoints, args.client_security)
    is_read = args.command in READS and not (args.command == "config" and args.changes)
    if not is_read and args.command not in REMOTING_CHANGES:
        remoting = [str(e) for e in endpoints if e.protocol == "remoting"]
        if remoting:
            parser.error(
                f"{args.command} needs namesrv-grpc's gRPC API; {';'.join(remoting)} names RocketMQ remoting "
                "(reads, compare and the other changes work over remoting)"
            )
    if args.command == "watch":
        if args.each:
            parser.error("--each is for reads; watch follows every NameServer anyway")
        # A watch retries quietly for ever: first name the addresses that can never serve it.
        wrong = [w for w in _wrong_ports(endpoints, args) if w is not None]
        for error in wrong:
            print(f"namesrv-admin: watch: {error.message}", file=sys.stderr)
        if len(wrong) == len(endpoints):
            return 1
        args.namesrv = ";".join(e.address for e in endpoints if e.address not in {w.address for w in wrong})
        return run_watch(args)
    if args.each and not is_read:
        parser.error(f"--each is for reads; {args.command} goes to every NameServer anyway")
    return _run_read(args, endpoints) if is_read else _run_change(args, endpoints)


if __name__ == "__main__":
    raise SystemExit(main())
