"""``namesrv-admin ... --format mqadmin``: what RocketMQ's ``mqadmin`` prints, so scripts written for
it keep working.

- :func:`mqadmin_route` -- ``mqadmin topicRoute -t TOPIC``: ``TopicRouteData.toJson(true)``, fastjson
  1.2.83's pretty format (``tools/.../topic/TopicRouteSubCommand.java``): one tab per level, no space
  after ``:``, bean properties in alphabetical order, null properties left out (``orderTopicConf``
  unless set, ``zoneName`` unless set), broker ids as unquoted integer keys (``0:"10.0.0.1:10911"``),
  empty maps and arrays as ``{}`` and ``[]``.
- :func:`mqadmin_cluster_list` -- ``mqadmin clusterList``'s table (``ClusterListSubCommand
  .printClusterBaseInfo``): its header and column widths, clusters and broker names in sorted order
  (Java's ``TreeSet``; the cluster order of Java's ``HashMap`` is not reproduced), broker ids in
  ascending order. Its columns after ``#Addr`` come from each broker (``GET_BROKER_RUNTIME_INFO``),
  which a NameServer does not know: they are printed exactly as ``mqadmin`` prints them for a
  broker it cannot reach (``0.00(,ms)``, ``false``, ...).

Both were checked against the output of ``mqadmin`` 5.5.0 (``tests/test_admin_remoting.py``).
"""

from __future__ import annotations

from typing import Any

from namesrv_grpc.core.model import ClusterInfo, TopicRouteData
from namesrv_grpc.wire import fastjson

__all__ = ["mqadmin_cluster_list", "mqadmin_route", "pretty_fastjson"]


def _pretty(value: Any, depth: int, out: list[str]) -> None:
    indent = "\t" * (depth + 1)
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if v is not None]
        if not items:
            out.append("{}")
            return
        out.append("{\n")
        for i, (key, item) in enumerate(items):
            out.append(indent)
            out.append(str(key) if isinstance(key, int) else fastjson.dumps(str(key)).decode())
            out.append(":")
            _pretty(item, depth + 1, out)
            out.append(",\n" if i < len(items) - 1 else "\n")
        out.append("\t" * depth + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        out.append("[\n")
        for i, item in enumerate(value):
            out.append(indent)
            _pretty(item, depth + 1, out)
            out.append(",\n" if i < len(value) - 1 else "\n")
        out.append("\t" * depth + "]")
    else:
        out.append(fastjson.dumps(value).decode())


def pretty_fastjson(value: Any) -> str:
    """``JSON.toJSONString(value, true)`` of fastjson 1.2.83 for dicts (keys in the order given; int
    keys unquoted; None values left out), lists, strings, integers and booleans."""
    out: list[str] = []
    _pretty(value, 0, out)
    return "".join(out)


def mqadmin_route(route: TopicRouteData) -> str:
    """``mqadmin topicRoute`` of ``route`` (module docstring), without the final newline."""
    return pretty_fastjson(
        {
            "brokerDatas": [
                {
                    "brokerAddrs": dict(sorted(b.broker_addrs.items())),
                    "brokerName": b.broker_name,
                    "cluster": b.cluster,
                    "enableActingMaster": b.enable_acting_master,
                    "zoneName": b.zone_name or None,
                }
                for b in route.broker_datas
            ],
            "filterServerTable": {addr: list(servers) for addr, servers in route.filter_server_table.items()},
            "orderTopicConf": route.order_topic_conf or None,
            "queueDatas": [
                {
                    "brokerName": q.broker_name,
                    "perm": q.perm,
                    "readQueueNums": q.read_queue_nums,
                    "topicSysFlag": q.topic_sys_flag,
                    "writeQueueNums": q.write_queue_nums,
                }
                for q in route.queue_datas
            ],
        }
    )


_CLUSTER_HEADER = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s"
_CLUSTER_ROW = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s"
_UNREACHABLE_BROKER = (
    "",  # #Version
    "     0.00(,ms)",  # #InTPS(LOAD): String.format("%9.2f(%s,%sms)", 0.0, "", "")
    "     0.00(,ms|,ms)",  # #OutTPS(LOAD): String.format("%9.2f(%s,%sms|%s,%sms)", 0.0, "", "", "", "")
    "0-0(0.0w, 0.0, 0.0)",  # #Timer(Progress): String.format("%d-%d(%.1fw, %.1f, %.1f)", 0, 0, 0f, 0f, 0f)
    "",  # #PCWait(ms)
    "0.00",  # #Hour
    "0.0000",  # #SPACE
    "false",  # #ACTIVATED
)


def mqadmin_cluster_list(info: ClusterInfo, cluster: str = "") -> str:
    """``mqadmin clusterList`` (``-c cluster`` when ``cluster`` is given) of ``info`` (module
    docstring), without the final newline."""
    header = (
        "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
        "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED",
    )  # fmt: skip
    lines = [_CLUSTER_HEADER % header]
    clusters = [cluster] if cluster else sorted(info.cluster_addr_table)
    for cluster_name in clusters:
        for broker_name in sorted(set(info.cluster_addr_table.get(cluster_name, ()))):
            broker_data = info.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            for broker_id, addr in sorted(broker_data.broker_addrs.items()):
                lines.append(_CLUSTER_ROW % (cluster_name, broker_name, broker_id, addr, *_UNREACHABLE_BROKER))
    return "\n".join(lines)
