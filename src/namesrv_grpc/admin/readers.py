"""How ``namesrv-admin`` talks to one NameServer: gRPC (namesrv-grpc) or RocketMQ remoting (any
NameServer, Java or ours), behind one asyncio interface that answers in the core's records.

An address of ``-n`` is ``host:port`` (the protocol is detected on the port), ``remoting://host:port``
or ``grpc://host:port``. Detection (:func:`open_reader`) sends one harmless remoting request,
``GET_NAMESRV_CONFIG`` (code 319, it changes nothing), as ``broker-agent`` does for its port hint: a
remoting answer means a remoting port, and the connection is kept for the reads; a connection that
the server closes or answers with something that is not a remoting frame (an HTTP/2 server's
``GOAWAY``) is a gRPC port. A port where nothing listens, or that does not answer within the
timeout, is a NameServer that could not be read (:class:`ReadError` with ``answered=False``).

An address that is not a NameServer port of the protocol in use raises :class:`WrongPortError`,
naming the mistake (:func:`identify_port` tells what listens there):

- a RocketMQ **broker's** port: it answers ``REQUEST_CODE_NOT_SUPPORTED`` (3) to a request every
  NameServer answers (:data:`NAMESRV_CODES`), as the broker's default processor does
  (``AdminBrokerProcessor``: "request type 106 not supported");
- an **HTTP** port (a metrics port, any web server): it answers ``HTTP/1.x`` to ``HEAD /``, or to the
  remoting frame;
- the **other protocol's** port: a gRPC (HTTP/2) server sends its SETTINGS frame to the remoting
  client (``remoting://`` on a gRPC port); a remoting port closes the HTTP/2 connection at once and
  answers a remoting request (``grpc://`` on a remoting port).

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
import contextlib
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
from namesrv_grpc.client.remoting import HTTP1, HTTP2, RemotingClient, RemotingConnectionError, foreign_protocol
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import BrokerData, ClusterInfo, QueueData, TopicRouteData
from namesrv_grpc.core.validation import parse_host_port
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies

__all__ = [
    "PROTOCOLS",
    "Endpoint",
    "GrpcReader",
    "NamesrvReader",
    "ReadError",
    "RemotingReader",
    "WrongPortError",
    "identify_port",
    "open_reader",
    "parse_endpoint",
]

PROTOCOLS: Final = ("remoting", "grpc")
"""The prefixes an address may carry (``remoting://``, ``grpc://``)."""

MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""Largest answer accepted over gRPC (a topic list of a big cluster; remoting frames are bounded at
16 MiB by the codec, as RocketMQ bounds them)."""

NOT_ANSWERING: Final = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

DEFAULT_REMOTING_PORT: Final = 9876
"""A NameServer's RocketMQ remoting port (``listenPort``)."""
DEFAULT_GRPC_PORT: Final = 8081
"""namesrv-grpc's gRPC port (``grpcServerPort``)."""
PROBE_TIMEOUT_SECONDS: Final = 3.0
"""At most this long for each probe of :func:`identify_port` (less when ``--timeout`` is shorter)."""

NAMESRV_CODES: Final = frozenset(
    {
        RequestCode.PUT_KV_CONFIG,
        RequestCode.GET_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.GET_KVLIST_BY_NAMESPACE,
        RequestCode.GET_TOPICS_BY_CLUSTER,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.GET_NAMESRV_CONFIG,
    }
)
"""Request codes every NameServer answers (Java 4.x and 5.x, ours: ``DefaultRequestProcessor``);
``REQUEST_CODE_NOT_SUPPORTED`` to one of them means the port is not a NameServer's.
``ADD_WRITE_PERM_OF_BROKER`` (327) is not one: NameServers before 4.9 do not know it."""


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
    naming what is wrong (an unknown scheme, a bad host or port, commas where ``;`` separates
    addresses)."""
    protocol: str | None = None
    address = text.strip()
    if "," in address:
        raise ValueError(
            "separate NameServer addresses with ';', not ',' (as RocketMQ's namesrvAddr): "
            f"{address.replace(',', ';')!r}"
        )
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


class WrongPortError(ReadError):
    """``address`` is not a NameServer port of the protocol in use (module docstring): ``kind`` is
    what listens there: ``broker``, ``http``, ``remoting`` (a NameServer's remoting port, where gRPC
    was wanted) or ``grpc`` (a gRPC port, where remoting was wanted). ``answered`` is False: a read
    asks the next NameServer."""

    def __init__(self, address: str, kind: str, message: str) -> None:
        super().__init__(address, message, answered=False)
        self.kind = kind


def broker_port_error(address: str, code: int) -> WrongPortError:
    """A broker's port: it answered ``REQUEST_CODE_NOT_SUPPORTED`` to request ``code``."""
    return WrongPortError(
        address,
        "broker",
        f"{address} looks like a RocketMQ broker port, not a NameServer (request code {code} not supported); "
        f"NameServers listen on {DEFAULT_REMOTING_PORT}",
    )


def http_port_error(address: str, status: str) -> WrongPortError:
    """An HTTP/1 server (``status``: the status line it answered)."""
    return WrongPortError(
        address,
        "http",
        f"{address} is an HTTP port (it answered {status!r}), not a NameServer: a metrics port? NameServers "
        f"listen on {DEFAULT_REMOTING_PORT} (RocketMQ remoting) and {DEFAULT_GRPC_PORT} (gRPC)",
    )


def remoting_port_error(address: str, grpc_only: str | None = None) -> WrongPortError:
    """A NameServer's remoting port where gRPC was wanted; ``grpc_only``: the command that needs gRPC
    (``snapshot``, ``watch``), None when the command also works over remoting."""
    if grpc_only:
        message = (
            f"{address} is a RocketMQ remoting port: {grpc_only} needs namesrv-grpc's gRPC API (give its gRPC "
            f"port, default {DEFAULT_GRPC_PORT})"
        )
    else:
        message = (
            f"{address} speaks RocketMQ remoting, not gRPC: use remoting://{address} or the gRPC port "
            f"(default {DEFAULT_GRPC_PORT})"
        )
    return WrongPortError(address, "remoting", message)


def grpc_port_error(address: str) -> WrongPortError:
    """A gRPC (HTTP/2) port where RocketMQ remoting was wanted."""
    return WrongPortError(
        address,
        "grpc",
        f"{address} speaks gRPC (HTTP/2), not RocketMQ remoting: use grpc://{address} or the remoting port "
        f"(default {DEFAULT_REMOTING_PORT})",
    )


def _status_line(answer: bytes) -> str:
    return answer.split(b"\n", 1)[0].rstrip(b"\r").decode("ascii", "replace")


async def _http_probe(host: str, port: int, security: ClientSecurity, timeout: float) -> bytes | None:
    """Send ``HEAD / HTTP/1.0`` and return the first bytes of the answer, empty when the server closed
    the connection without answering; None when no connection was made or nothing came in time."""
    tls: dict[str, Any] = {}
    context = security.ssl_context()
    if context is not None:
        tls = {"ssl": context, "server_hostname": security.server_name or host}
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, **tls)
    except (OSError, TimeoutError, ssl.SSLError):
        return None
    answer, closed = b"", False
    try:
        async with asyncio.timeout(timeout):
            writer.write(b"HEAD / HTTP/1.0\r\n\r\n")  # HTTP/1.0: no Host header needed
            await writer.drain()
            while len(answer) < 64:
                data = await reader.read(64 - len(answer))
                if not data:
                    closed = True
                    break
                answer += data
    except TimeoutError:  # (an OSError: first)
        pass
    except (OSError, ssl.SSLError):
        closed = True
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    return answer if answer or closed else None


async def identify_port(address: str, security: ClientSecurity, timeout: float) -> tuple[str, str] | None:
    """What listens on ``address`` (``host:port``), asked after a NameServer request failed there:
    ``("http", status line)``, ``("grpc", "")`` (an HTTP/2 server), ``("remoting", "")`` (a NameServer's
    remoting port: it answered GET_NAMESRV_CONFIG), ``("broker", "319")`` (a remoting server that does
    not support GET_NAMESRV_CONFIG, 319), or None when it cannot tell (nothing listens, no answer).

    Two probes on fresh connections, each within ``min(timeout, PROBE_TIMEOUT_SECONDS)``: ``HEAD /
    HTTP/1.0`` (an HTTP/1 server answers a status line, an HTTP/2 server its SETTINGS frame, a remoting
    server closes the connection: "HEAD" read as a frame length is 1.2 GB, more than RocketMQ's 16 MiB),
    then, when the connection was closed unanswered, one GET_NAMESRV_CONFIG request (it changes nothing)."""
    host, port = parse_host_port(address)
    host = host.strip("[]")
    timeout = min(timeout, PROBE_TIMEOUT_SECONDS)
    answer = await _http_probe(host, port, security, timeout)
    if answer is None:  # nothing listens, or it waits for more (neither HTTP nor remoting)
        return None
    protocol = foreign_protocol(answer)
    if protocol == HTTP1:
        return "http", _status_line(answer)
    if protocol == HTTP2:
        return "grpc", ""
    try:
        client = await RemotingClient.connect(
            host, port, timeout=timeout, ssl_context=security.ssl_context(), server_hostname=security.server_name
        )
    except (OSError, TimeoutError, ssl.SSLError):
        return None
    try:
        fields = security.remoting_fields({}, b"")
        response = await client.request(RequestCode.GET_NAMESRV_CONFIG, fields, timeout=timeout)
    except (RemotingConnectionError, TimeoutError):
        return None
    finally:
        await client.close()
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return "broker", str(int(RequestCode.GET_NAMESRV_CONFIG))
    return "remoting", ""


async def wrong_port(
    address: str, security: ClientSecurity, timeout: float, *, wanted: str, grpc_only: str | None = None
) -> WrongPortError | None:
    """The :class:`WrongPortError` for ``address`` when it is not a NameServer port speaking ``wanted``
    (``remoting`` or ``grpc``; ``grpc_only``: see :func:`remoting_port_error`), None when it is one or
    :func:`identify_port` cannot tell."""
    found = await identify_port(address, security, timeout)
    if found is None:
        return None
    kind, detail = found
    if kind == "http":
        return http_port_error(address, detail)
    if kind == "broker":
        return broker_port_error(address, int(detail))
    if kind == "remoting" and wanted == "grpc":
        return remoting_port_error(address, grpc_only)
    if kind == "grpc" and wanted == "remoting":
        return grpc_port_error(address)
    return None


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
        """Send one (signed) request; return the answer whatever its code, except
        ``REQUEST_CODE_NOT_SUPPORTED`` to one of :data:`NAMESRV_CODES` (a broker's port). Raises
        ReadError (``answered=False``) when the connection fails or no answer comes within the
        timeout; :class:`WrongPortError` when the peer is not a NameServer's remoting port."""
        ext = self._security.remoting_fields(dict(fields or {}), body)
        try:
            answer = await self._client.request(code, ext, body, timeout=self._timeout)
        except RemotingConnectionError as exc:
            if exc.peer_protocol == HTTP2:
                raise grpc_port_error(self.address) from None
            if exc.peer_protocol == HTTP1:
                raise http_port_error(self.address, _status_line(exc.peer_answer)) from None
            raise ReadError(self.address, f"UNAVAILABLE: {exc}", answered=False) from None
        except TimeoutError:
            # An HTTP/1 server waits for the end of a request line that a remoting frame never sends.
            if not self._client.framed:
                found = await identify_port(self.address, self._security, self._timeout)
                if found is not None and found[0] == "http":
                    raise http_port_error(self.address, found[1]) from None
            raise ReadError(
                self.address, f"DEADLINE_EXCEEDED: no answer within {self._timeout:g} s", answered=False
            ) from None
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            if code in NAMESRV_CODES:
                raise broker_port_error(self.address, int(code))
            # A code older NameServers lack (ADD_WRITE_PERM_OF_BROKER): a broker lacks GET_NAMESRV_CONFIG
            # too, and this request then raises WrongPortError.
            await self.request(RequestCode.GET_NAMESRV_CONFIG)
        return answer

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
        self._security = security
        self._wrong_port: asyncio.Task[WrongPortError | None] | None = None
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
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                if self._wrong_port is None:  # asked once, whatever the number of calls failing at once
                    self._wrong_port = asyncio.ensure_future(
                        wrong_port(self.address, self._security, self._timeout, wanted="grpc")
                    )
                wrong = await asyncio.shield(self._wrong_port)
                if wrong is not None:
                    raise wrong from None
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
    except WrongPortError as exc:
        await reader.close()
        if exc.kind == "grpc":
            return GrpcReader(endpoint.address, security, timeout)
        raise
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


def run(coroutine: Any) -> Any:
    """Run one coroutine to completion on a fresh event loop (the CLI is synchronous)."""
    return asyncio.run(coroutine)
