"""Domain errors -> remoting response codes and remarks, in one place (the remoting twin of
:mod:`namesrv_grpc.grpc_api.grpc_errors`).

RocketMQ's NameServer answers a refused request with a response code and a remark, never by closing
the connection. The codes and remarks below are the ones ``DefaultRequestProcessor`` and
``ClientRequestProcessor`` (RocketMQ 5.x) use for the same situation::

    NamesrvError                    response code        remark
    ├── TopicRouteNotFoundError     TOPIC_NOT_EXIST 17   No topic route info in name server for the topic: T
    │                                                    + FAQUrl.suggestTodo(APPLY_TOPIC_URL)
    ├── KVConfigNotFoundError       QUERY_NOT_FOUND 22   No config item, Namespace: N Key: K
    ├── BodyChecksumMismatchError   SYSTEM_ERROR 1       crc32 not match
    ├── ConfigKeyBlacklistedError   NO_PERMISSION 16     Can not update config in black list.
    ├── AccessDeniedError           NO_PERMISSION 16     the ACL's reason (who may not do what)
    ├── BadSignatureError           NO_PERMISSION 16     what is wrong with AccessKey/Signature
    ├── ServiceWarmingUpError       SYSTEM_ERROR 1       name server not ready
    ├── RegistrationRefusedError    SYSTEM_ERROR 1       register broker failed
    ├── TopicListDisabledError      SYSTEM_ERROR 1       disable
    └── anything else               SYSTEM_ERROR 1       the error's message (what is wrong, which field)

RocketMQ answers a request it cannot decode (missing header field, bad body) with SYSTEM_ERROR and the
exception's text (``NettyRemotingAbstract.processRequestCommand``); we answer SYSTEM_ERROR with our
message, which names the field.
"""

from __future__ import annotations

from namesrv_grpc.core import errors
from namesrv_grpc.remoting.codes import ResponseCode

FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
"""RocketMQ ``FAQUrl.DEFAULT_FAQ_URL`` (= ``APPLY_TOPIC_URL``)."""


def suggest_todo(url: str) -> str:
    """RocketMQ ``FAQUrl.suggestTodo``: the line appended to some remarks."""
    return f"\nSee {url} for further details."


def topic_not_exist_remark(topic: str) -> str:
    """The remark of TOPIC_NOT_EXIST, exactly as ``ClientRequestProcessor.getRouteInfoByTopic`` writes it."""
    return f"No topic route info in name server for the topic: {topic}{suggest_todo(FAQ_URL)}"


def kv_not_found_remark(namespace: str, key: str | None = None) -> str:
    """The remark of QUERY_NOT_FOUND for GET_KV_CONFIG (with key) and GET_KVLIST_BY_NAMESPACE (without)."""
    if key is None:
        return f"No config item, Namespace: {namespace}"
    return f"No config item, Namespace: {namespace} Key: {key}"


def not_supported_remark(code: int) -> str:
    """The remark of REQUEST_CODE_NOT_SUPPORTED, as ``DefaultRequestProcessor`` writes it (leading space)."""
    return f" request type {code} not supported"


def to_response(error: errors.NamesrvError) -> tuple[int, str]:
    """``(response code, remark)`` for a domain error raised by a handler."""
    if isinstance(error, errors.TopicRouteNotFoundError):
        return ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(error.metadata.get("topic", ""))
    if isinstance(error, errors.KVConfigNotFoundError):
        namespace, key = error.metadata.get("namespace"), error.metadata.get("key")
        if namespace is not None:
            return ResponseCode.QUERY_NOT_FOUND, kv_not_found_remark(namespace, key)
        return ResponseCode.QUERY_NOT_FOUND, error.message
    if isinstance(error, errors.BodyChecksumMismatchError):
        return ResponseCode.SYSTEM_ERROR, "crc32 not match"
    if isinstance(error, errors.ConfigKeyBlacklistedError):
        return ResponseCode.NO_PERMISSION, "Can not update config in black list."
    if isinstance(error, (errors.AccessDeniedError, errors.BadSignatureError)):
        return ResponseCode.NO_PERMISSION, error.message
    if isinstance(error, errors.ServiceWarmingUpError):
        return ResponseCode.SYSTEM_ERROR, "name server not ready"
    if isinstance(error, errors.RegistrationRefusedError):
        return ResponseCode.SYSTEM_ERROR, "register broker failed"
    if isinstance(error, errors.TopicListDisabledError):
        return ResponseCode.SYSTEM_ERROR, "disable"
    return ResponseCode.SYSTEM_ERROR, error.message
