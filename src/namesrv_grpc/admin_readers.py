"""How ``namesrv-admin`` talks to one NameServer: gRPC (namesrv-grpc) or RocketMQ remoting (any
NameServer, Java or ours), behind one asyncio interface that answers in the core's records.

An address of ``-n`` is ``host:port`` (the protocol is detected on the port), ``remoting://host:port``
or ``grpc://host:port``. Detection (:func:`open_reader`) sends one harmless remoting request,
``GET_NAMESRV_CONFIG`` (code 319, it changes nothing), as ``broker-agent`` does for its port hint: a
remoting answer means a remoting port, and the connection is kept for the reads; a connection that
the server closes or answers with something that is not a remoting frame (an HTTP/2 server's
``GOAWAY``) is a gRPC port. A port where nothing listens, or that does not answer within the
timeout, is a NameServer that could not be read (:class:`ReadError` with ``answered=False``).

The security options apply to both: TLS (``ClientSecurity.ssl_context`` for remoting, channel
credentials for gRPC) and RocketMQ AccessKey/Signature (``AclClientRPCHook``'s fields over
remoting, the ``authorization`` metadata over gRPC).

Reads answer with :mod:`namesrv_grpc.core.model` records (``ClusterInfo``, ``TopicRouteData``), so a
Java NameServer and ours are compared and printed the same way. "Not found" is ``None``, never an
error (a route: ``TOPIC_NOT_EXIST`` 17 / gRPC ``NOT_FOUND``; a KV value or namespace:
``QUERY_NOT_FOUND`` 22 / ``NOT_FOUND``).
"""

from __future__ import annotations

import abc
import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import grpc

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv.v1 import types_pb2
from namesrv_grpc.core.model import BrokerData, ClusterInfo, QueueData, TopicRouteData
from namesrv_grpc.core.validation import parse_host_port
from namesrv_grpc.remoting import bodies
from namesrv_grpc.remoting.client import RemotingClient, RemotingConnectionError
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.security.client import ClientSecurity

__all__ = [
    "PROTOCOLS",
    "Endpoint",
    "GrpcReader",
    "NamesrvReader",
    "ReadError",
    "RemotingReader",
    "open_reader",
    "parse_endpoint",
]

PROTOCOLS: Final = ("remoting", "grpc")
"""The prefixes an address may carry (``remoting://``, ``grpc://``)."""

MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""Largest answer accepted over gRPC (a topic list of a big cluster; remoting frames are bounded at
16 MiB by the codec, as RocketMQ bounds them)."""

NOT_ANSWERING: Final = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass(frozen=True)
class Endpoint:
    """One ``-n`` entry: ``address`` is ``host:port``; ``protocol`` is ``remoting``, ``grpc`` or
    ``None`` (detect it on the port)."""

    address: str
    protocol: str | None = None

    def __str__(self) -> str:
        return f"{self.protocol}://{self.address}" if self.protocol else self.address


def parse_endpoint(text: str) -> Endpoint:
    """``host:port``, ``remoting://host:port`` or ``grpc://host:port`` -> Endpoint. Raises ValueError
    naming what is wrong (an unknown scheme, a bad host or port)."""
    protocol: str | None = None
    address = text.strip()
    if "://" in address:
        scheme, _, address = address.partition("://")
        if scheme.lower() not in PROTOCOLS:
            raise ValueError(f"unknown protocol {scheme!r}: use remoting:// or grpc:// (or none to detect it)")
        protocol = scheme.lower()
    parse_host_port(address)
    return Endpoint(address, protocol)


class ReadError(Exception):
    """A NameServer could not answer a read: ``answered`` is False when it could not be reached or did
    not answer in time (a read then asks the next NameServer), True when it answered with an error."""

    def __init__(self, address: str, message: str, *, answered: bool) -> None:
        super().__init__(f"{address}: {message}")
        self.address = address
        self.message = message
        self.answered = answered
        self.tls_failed = False
        """The TLS handshake failed (a gRPC port may refuse a TLS client that offers no ALPN ``h2``)."""


class NamesrvReader(abc.ABC):
    """One NameServer, read over one connection (or channel); every method raises :class:`ReadError`."""

    address: str
    protocol: str

    @abc.abstractmethod
    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106) / ``GetBrokerClusterInfo``."""

    @abc.abstractmethod
    async def topic_list(self, cluster: str = "") -> list[str]:
        """Every topic (GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206), or one cluster's (GET_TOPICS_BY_CLUSTER 224)."""

    @abc.abstractmethod
    async def route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC (105) / ``PickupTopicRoute``; None when the topic has no route."""

    @abc.abstractmethod
    async def kv_get(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101); None when not set."""

    @abc.abstractmethod
    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """GET_KVLIST_BY_NAMESPACE (219); None for an unknown (or empty) namespace."""

    @abc.abstractmethod
    async def config(self) -> dict[str, str]:
        """GET_NAMESRV_CONFIG (319): every configuration key with its value as text."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the connection."""


# ------------------------------------------------------------------------------------------ remoting


class RemotingReader(NamesrvReader):
    """A NameServer's remoting port (Java or ours), over one pipelined connection."""

    protocol = "remoting"

    def __init__(self, address: str, client: RemotingClient, security: ClientSecurity, timeout: float) -> None:
        self.address = address
        self._client = client
        self._security = security
        self._timeout = timeout

    @classmethod
    async def connect(cls, address: str, security: ClientSecurity, timeout: float) -> RemotingReader:
        """Open the connection (raises ReadError with ``answered=False`` when it cannot be opened)."""
        host, port = parse_host_port(address)
        try:
            client = await RemotingClient.connect(
                host.strip("[]"),
                port,
                timeout=timeout,
                ssl_context=security.ssl_context(),
                server_hostname=security.server_name,
            )
        except ssl.SSLError as exc:
            error = ReadError(address, f"UNAVAILABLE: TLS handshake failed: {exc}", answered=False)
            error.tls_failed = True
            raise error from None
        except (OSError, TimeoutError) as exc:
            raise ReadError(
                address, f"UNAVAILABLE: cannot connect: {exc or type(exc).__name__}", answered=False
            ) from None
        return cls(address, client, security, timeout)

    async def request(
        self, code: RequestCode, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Send one (signed) request; return the answer whatever its code. Raises ReadError
        (``answered=False``) when the connection fails or no answer comes within the timeout."""
        ext = self._security.remoting_fields(dict(fields or {}), body)
        try:
            return await self._client.request(code, ext, body, timeout=self._timeout)
        except RemotingConnectionError as exc:
            raise ReadError(self.address, f"UNAVAILABLE: {exc}", answered=False) from None
        except TimeoutError:
            raise ReadError(
                self.address, f"DEADLINE_EXCEEDED: no answer within {self._timeout:g} s", answered=False
            ) from None

    async def change(self, code: RequestCode, fields: Mapping[str, str], body: bytes = b"") -> RemotingCommand:
        """A request that changes something (PUT_KV_CONFIG, WIPE_WRITE_PERM_OF_BROKER, ...): the
        answer when SUCCESS; raises ReadError (``CODE: remark``) else."""
        answer = await self._ok(code, fields, body, not_found_is_none=False)
        assert answer is not None
        return answer

    async def _ok(
        self,
        code: RequestCode,
        fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        not_found_is_none: bool = True,
    ) -> RemotingCommand | None:
        """The answer when SUCCESS, None when TOPIC_NOT_EXIST / QUERY_NOT_FOUND; raises ReadError else."""
        answer = await self.request(code, fields, body)
        if answer.code == ResponseCode.SUCCESS:
            return answer
        if not_found_is_none and answer.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND):
            return None
        try:
            name = ResponseCode(answer.code).name
        except ValueError:
            name = f"code {answer.code}"
        raise ReadError(self.address, f"{name}: {answer.remark or ''}".rstrip(": "), answered=True)

    def _decoded(self, what: str, decode: Any, body: bytes) -> Any:
        try:
            return decode(body)
        except ValueError as exc:
            raise ReadError(self.address, f"cannot read its {what}: {exc}", answered=True) from None

    async def cluster_info(self) -> ClusterInfo:
        answer = await self._ok(RequestCode.GET_BROKER_CLUSTER_INFO)
        if answer is None or not answer.body:
            return ClusterInfo({}, {})
        info: ClusterInfo = self._decoded("ClusterInfo", bodies.decode_cluster_info, answer.body)
        return info

    async def topic_list(self, cluster: str = "") -> list[str]:
        if cluster:
            answer = await self._ok(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        else:
            answer = await self._ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if answer is None or not answer.body:
            return []
        topics, _addr = self._decoded("TopicList", bodies.decode_topic_list, answer.body)
        return sorted(topics)

    async def route(self, topic: str) -> TopicRouteData | None:
        answer = await self._ok(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if answer is None:
            return None
        route: TopicRouteData = self._decoded("TopicRouteData", bodies.decode_topic_route_data, answer.body)
        return route

    async def kv_get(self, namespace: str, key: str) -> str | None:
        answer = await self._ok(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
        return None if answer is None else answer.ext_fields.get("value")

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        answer = await self._ok(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
        if answer is None or not answer.body:
            return None
        table: dict[str, str] = self._decoded("KVTable", bodies.decode_kv_table, answer.body)
        return table or None

    async def config(self) -> dict[str, str]:
        answer = await self._ok(RequestCode.GET_NAMESRV_CONFIG)
        if answer is None or not answer.body:
            return {}
        config: dict[str, str] = self._decoded("configuration", bodies.decode_namesrv_config, answer.body)
        return config

    async def close(self) -> None:
        await self._client.close()


# ---------------------------------------------------------------------------------------------- gRPC


def route_from_proto(message: types_pb2.TopicRouteData) -> TopicRouteData:
    """``namesrv.v1.TopicRouteData`` -> TopicRouteData."""
    return TopicRouteData(
        tuple(
            QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            for q in message.queue_datas
        ),
        tuple(broker_data_from_proto(b) for b in message.broker_datas),
        {addr: tuple(servers.filter_server_addrs) for addr, servers in message.filter_server_table.items()},
        message.order_topic_conf,
    )


def broker_data_from_proto(message: types_pb2.BrokerData) -> BrokerData:
    """``namesrv.v1.BrokerData`` -> BrokerData."""
    return BrokerData(
        message.cluster,
        message.broker_name,
        dict(message.broker_addrs),
        message.zone_name,
        message.enable_acting_master,
    )


def cluster_info_from_proto(message: ns_pb2.GetBrokerClusterInfoResponse) -> ClusterInfo:
    """``GetBrokerClusterInfoResponse`` -> ClusterInfo."""
    return ClusterInfo(
        {name: broker_data_from_proto(b) for name, b in message.broker_addr_table.items()},
        {name: tuple(names.broker_names) for name, names in message.cluster_addr_table.items()},
    )


class GrpcReader(NamesrvReader):
    """A namesrv-grpc NameServer's gRPC port, over one asyncio channel."""

    protocol = "grpc"

    def __init__(self, address: str, security: ClientSecurity, timeout: float) -> None:
        self.address = address
        self._timeout = timeout
        self._channel = security.aio_channel(address, [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        self._ns = ns_grpc.NameServerServiceStub(self._channel)
        self._kv = kv_grpc.KVConfigServiceStub(self._channel)
        self._admin = admin_grpc.AdminServiceStub(self._channel)

    async def _call(self, method: Any, request: Any, *, not_found: bool = False) -> Any:
        try:
            return await method(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            if not_found and error.code() == grpc.StatusCode.NOT_FOUND:
                return None
            answered = error.code() not in NOT_ANSWERING
            raise ReadError(self.address, f"{error.code().name}: {error.details()}", answered=answered) from None

    async def cluster_info(self) -> ClusterInfo:
        response = await self._call(self._ns.GetBrokerClusterInfo, ns_pb2.GetBrokerClusterInfoRequest())
        return cluster_info_from_proto(response)

    async def topic_list(self, cluster: str = "") -> list[str]:
        if cluster:
            request = ns_pb2.GetTopicsByClusterRequest(cluster_name=cluster)
            response = await self._call(self._ns.GetTopicsByCluster, request)
        else:
            response = await self._call(self._ns.GetAllTopicList, ns_pb2.GetAllTopicListRequest())
        return sorted(response.topics)

    async def route(self, topic: str) -> TopicRouteData | None:
        request = ns_pb2.PickupTopicRouteRequest(topic=topic)
        response = await self._call(self._ns.PickupTopicRoute, request, not_found=True)
        return None if response is None else route_from_proto(response.route)

    async def kv_get(self, namespace: str, key: str) -> str | None:
        request = kv_pb2.GetKVConfigRequest(namespace=namespace, key=key)
        response = await self._call(self._kv.GetKVConfig, request, not_found=True)
        return None if response is None else str(response.value)

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        request = kv_pb2.GetKVListByNamespaceRequest(namespace=namespace)
        response = await self._call(self._kv.GetKVListByNamespace, request, not_found=True)
        return (dict(response.table) or None) if response is not None else None

    async def config(self) -> dict[str, str]:
        response = await self._call(self._admin.GetNamesrvConfig, admin_pb2.GetNamesrvConfigRequest())
        return dict(response.config)

    async def close(self) -> None:
        await self._channel.close()


# ----------------------------------------------------------------------------------------- detection


async def open_reader(endpoint: Endpoint, security: ClientSecurity, timeout: float) -> NamesrvReader:
    """A reader for ``endpoint``; with no protocol given, detected on the port (module docstring).
    Raises ReadError (``answered=False``) when the NameServer cannot be reached."""
    if endpoint.protocol == "grpc":
        return GrpcReader(endpoint.address, security, timeout)
    try:
        reader = await RemotingReader.connect(endpoint.address, security, timeout)
    except ReadError as exc:
        if exc.tls_failed and endpoint.protocol is None:
            return GrpcReader(endpoint.address, security, timeout)
        raise
    if endpoint.protocol == "remoting":
        return reader
    try:
        await reader.request(RequestCode.GET_NAMESRV_CONFIG)
    except ReadError as exc:
        await reader.close()
        if exc.message.startswith("DEADLINE_EXCEEDED"):
            raise ReadError(
                endpoint.address,
                f"DEADLINE_EXCEEDED: no answer within {timeout:g} s (neither a remoting nor a gRPC answer; "
                "name the protocol with remoting:// or grpc://)",
                answered=False,
            ) from None
        return GrpcReader(endpoint.address, security, timeout)
    return reader


async def detect_protocol(endpoint: Endpoint, security: ClientSecurity, timeout: float) -> str:
    """``remoting`` or ``grpc`` for ``endpoint`` (as :func:`open_reader` decides). Raises ReadError."""
    reader = await open_reader(endpoint, security, timeout)
    await reader.close()
    return reader.protocol


def run(coroutine: Any) -> Any:
    """Run one coroutine to completion on a fresh event loop (the CLI is synchronous)."""
    return asyncio.run(coroutine)
