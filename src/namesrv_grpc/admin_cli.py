"""``namesrv-admin``: ask a NameServer from the shell, like RocketMQ's ``mqadmin topicRoute`` /
``clusterList`` / ``updateKvConfig``. Prints JSON (protobuf field names) on stdout.

Exit codes: 0 on success, 1 when the NameServer answers with an error (``CODE: message`` on
stderr) or cannot be reached, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
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
from namesrv_grpc.admin_watch import add_watch_parser, run_watch
from namesrv_grpc.properties import ConfigError
from namesrv_grpc.security import client as security

TIMEOUT_SECONDS = 10.0


def to_json(message: Message) -> str:
    """A message as indented JSON with the .proto field names, defaults included."""
    return json.dumps(
        MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True),
        indent=2,
        ensure_ascii=False,
        sort_keys=True,
    )


def build_parser() -> argparse.ArgumentParser:
    """Sub-commands, one per RPC worth running by hand."""
    parser = argparse.ArgumentParser(prog="namesrv-admin", description="Query and manage a namesrv-grpc NameServer.")
    parser.add_argument(
        "--namesrv",
        "-n",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:8081").split(";")[0],
        help="host:port of the NameServer (default: first of NAMESRV_ADDR, else 127.0.0.1:8081)",
    )
    security.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("route", help="route of a topic (PickupTopicRoute)").add_argument("topic")
    sub.add_parser("clusters", help="brokers and clusters (GetBrokerClusterInfo)")
    topics = sub.add_parser("topics", help="all topics, or one cluster's (GetAllTopicList / GetTopicsByCluster)")
    topics.add_argument("--cluster", default="")
    for name in ("kv-get", "kv-delete"):
        p = sub.add_parser(name, help=f"{name.replace('-', ' ')} one KV config value")
        p.add_argument("namespace")
        p.add_argument("key")
    put = sub.add_parser("kv-put", help="set one KV config value (PutKVConfig)")
    put.add_argument("namespace")
    put.add_argument("key")
    put.add_argument("value")
    sub.add_parser("kv-list", help="one KV namespace (GetKVListByNamespace)").add_argument("namespace")
    sub.add_parser("wipe-write-perm", help="WipeWritePermOfBroker").add_argument("broker_name")
    sub.add_parser("add-write-perm", help="AddWritePermOfBroker").add_argument("broker_name")
    delete = sub.add_parser("delete-topic", help="DeleteTopic")
    delete.add_argument("topic")
    delete.add_argument("--cluster", default="")
    sub.add_parser("snapshot", help="export a route snapshot into the server's snapshotDir (ExportRouteSnapshot)")
    config = sub.add_parser("config", help="show the config, or change keys: config KEY=VALUE ...")
    config.add_argument("changes", nargs="*", metavar="KEY=VALUE")
    add_watch_parser(sub)
    return parser


def _command(args: argparse.Namespace, channel: grpc.Channel) -> Callable[[], Message]:
    ns = ns_grpc.NameServerServiceStub(channel)
    kv = kv_grpc.KVConfigServiceStub(channel)
    admin = admin_grpc.AdminServiceStub(channel)
    t = TIMEOUT_SECONDS
    commands: dict[str, Callable[[], Any]] = {
        "route": lambda: ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=args.topic), timeout=t),
        "clusters": lambda: ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=t),
        "topics": lambda: (
            ns.GetTopicsByCluster(ns_pb2.GetTopicsByClusterRequest(cluster_name=args.cluster), timeout=t)
            if args.cluster
            else ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=t)
        ),
        "kv-get": lambda: kv.GetKVConfig(kv_pb2.GetKVConfigRequest(namespace=args.namespace, key=args.key), timeout=t),
        "kv-delete": lambda: kv.DeleteKVConfig(
            kv_pb2.DeleteKVConfigRequest(namespace=args.namespace, key=args.key), timeout=t
        ),
        "kv-put": lambda: kv.PutKVConfig(
            kv_pb2.PutKVConfigRequest(namespace=args.namespace, key=args.key, value=args.value), timeout=t
        ),
        "kv-list": lambda: kv.GetKVListByNamespace(
            kv_pb2.GetKVListByNamespaceRequest(namespace=args.namespace), timeout=t
        ),
        "wipe-write-perm": lambda: admin.WipeWritePermOfBroker(
            admin_pb2.WipeWritePermOfBrokerRequest(broker_name=args.broker_name), timeout=t
        ),
        "add-write-perm": lambda: admin.AddWritePermOfBroker(
            admin_pb2.AddWritePermOfBrokerRequest(broker_name=args.broker_name), timeout=t
        ),
        "delete-topic": lambda: admin.DeleteTopic(
            admin_pb2.DeleteTopicRequest(topic=args.topic, cluster_name=args.cluster), timeout=t
        ),
        "snapshot": lambda: admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=600),
        "config": lambda: (
            admin.UpdateNamesrvConfig(
                admin_pb2.UpdateNamesrvConfigRequest(config=dict(c.split("=", 1) for c in args.changes)), timeout=t
            )
            if args.changes
            else admin.GetNamesrvConfig(admin_pb2.GetNamesrvConfigRequest(), timeout=t)
        ),
    }
    return commands[args.command]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "config" and any("=" not in c for c in args.changes):
        parser.error("config changes must be KEY=VALUE")
    if args.command == "watch":
        return run_watch(args)
    try:
        client_security = security.security_from_args(args)
    except ConfigError as exc:
        print(f"namesrv-admin: {exc}", file=sys.stderr)
        return 2
    with client_security.channel(args.namesrv) as channel:
        try:
            response = _command(args, channel)()
        except grpc.RpcError as error:
            call = cast(grpc.Call, error)
            print(f"namesrv-admin: {call.code().name}: {call.details()}", file=sys.stderr)
            return 1
    print(to_json(response))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
