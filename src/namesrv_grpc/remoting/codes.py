"""Numbers of RocketMQ's remoting protocol, as Apache RocketMQ 5.x defines them.

- :class:`RequestCode` -- the 23 request codes a NameServer answers
  (``remoting/.../protocol/RequestCode.java``; handled in ``namesrv/.../processor/DefaultRequestProcessor.java``
  and ``ClientRequestProcessor.java``).
- :class:`ResponseCode` -- the response codes a NameServer answers with
  (``ResponseCode.java`` and ``RemotingSysResponseCode.java``).
- :data:`LANGUAGE_CODES` -- ``LanguageCode.java``: name -> the byte of the ROCKETMQ header.
- :class:`SerializeType` -- the header serialization, the top byte of the frame's second int32
  (``SerializeType.java``).
- Flag bits of a command (``RemotingCommand.RPC_TYPE`` / ``RPC_ONEWAY``).
- :data:`VERSION_V4_9_4` / :data:`CURRENT_VERSION` -- ordinals of ``MQVersion.Version``.
"""

from __future__ import annotations

from enum import IntEnum
from types import MappingProxyType
from typing import Final


class RequestCode(IntEnum):
    """The request codes of a RocketMQ 5.x NameServer (all 23; ``RequestCode.java``)."""

    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904


NOTIFY_MIN_BROKER_ID_CHANGE: Final = 905
"""The one request the NameServer *sends* (to brokers, one-way; RocketMQ 5.x
``RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE``, S53). Not in :class:`RequestCode`: it is never answered here."""


class ResponseCode(IntEnum):
    """Response codes a NameServer answers with (``RemotingSysResponseCode.java`` for 0-3,
    ``ResponseCode.java`` for the rest)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    INVALID_PARAMETER = 29


LANGUAGE_CODES: Final = MappingProxyType(
    {
        "JAVA": 0,
        "CPP": 1,
        "DOTNET": 2,
        "PYTHON": 3,
        "DELPHI": 4,
        "ERLANG": 5,
        "RUBY": 6,
        "OTHER": 7,
        "HTTP": 8,
        "GO": 9,
        "PHP": 10,
        "OMS": 11,
        "RUST": 12,
        "NODE_JS": 13,
    }
)
"""``LanguageCode`` name -> its byte in the ROCKETMQ header (``LanguageCode.java``)."""

LANGUAGE_NAMES: Final = MappingProxyType({code: name for name, code in LANGUAGE_CODES.items()})
"""Byte -> ``LanguageCode`` name."""


class SerializeType(IntEnum):
    """How a command's header is serialized (``SerializeType.java``): the top byte of the frame's
    second int32."""

    JSON = 0
    ROCKETMQ = 1


FLAG_RESPONSE: Final = 1 << 0
"""Flag bit of a response (``RemotingCommand.RPC_TYPE`` = bit 0); clear in a request."""

FLAG_ONEWAY: Final = 1 << 1
"""Flag bit of a oneway request, which gets no answer (``RemotingCommand.RPC_ONEWAY`` = bit 1)."""

VERSION_V4_9_4: Final = 401

VERSION_V5_0_0: Final = 413
"""Ordinal of ``MQVersion.Version.V5_0_0``: a compressed REGISTER_BROKER body of a sender at least
this new carries static-topic mappings after its filter servers (``RegisterBrokerBody.decode``)."""
"""``MQVersion.Version.V4_9_4.ordinal()``: a GET_ROUTEINFO_BY_TOPIC request with ``version`` at
least this gets standard JSON (quoted integer keys) back (``ClientRequestProcessor``)."""

CURRENT_VERSION: Final = 479
"""``MQVersion.Version.V5_3_3.ordinal()``: the version RocketMQ 5.3.3 puts in every command it sends
(``NamesrvStartup`` sets ``rocketmq.remoting.version`` to ``MQVersion.CURRENT_VERSION``)."""

DEFAULT_FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024
"""RocketMQ's default largest frame, 16 MiB (``com.rocketmq.remoting.frameMaxLength`` in
``NettyDecoder``), counting the 4 length bytes as Netty's ``LengthFieldBasedFrameDecoder`` does."""
