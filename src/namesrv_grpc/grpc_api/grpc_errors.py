"""Domain errors -> gRPC status codes, in one place (CONTRACT.md, "Errors").

:mod:`namesrv_grpc.grpc_api.handlers` wraps every method of the server once, at registration: a
:class:`~namesrv_grpc.core.errors.NamesrvError` raised inside becomes a status with a
``google.rpc.Status`` detail holding one ``google.rpc.ErrorInfo`` (domain ``namesrv.rocketmq``).
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from namesrv_grpc.core import errors

ERROR_DOMAIN = "namesrv.rocketmq"
"""``google.rpc.ErrorInfo.domain`` of every error this server returns."""

STATUS_CODES: dict[type[errors.NamesrvError], grpc.StatusCode] = {
    errors.InvalidFieldError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.MalformedBodyError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.MalformedRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.BodyChecksumMismatchError: grpc.StatusCode.DATA_LOSS,
    errors.TopicRouteNotFoundError: grpc.StatusCode.NOT_FOUND,
    errors.BrokerNotRegisteredError: grpc.StatusCode.NOT_FOUND,
    errors.BrokerNameNotRegisteredError: grpc.StatusCode.NOT_FOUND,
    errors.KVConfigNotFoundError: grpc.StatusCode.NOT_FOUND,
    errors.StaleBrokerStateError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.RegistrationRefusedError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.TopicListDisabledError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ConfigKeyBlacklistedError: grpc.StatusCode.PERMISSION_DENIED,
    errors.AccessDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    errors.BadSignatureError: grpc.StatusCode.UNAUTHENTICATED,
    errors.PersistError: grpc.StatusCode.INTERNAL,
    errors.ServiceWarmingUpError: grpc.StatusCode.UNAVAILABLE,
    errors.RouteTableUnavailableError: grpc.StatusCode.UNAVAILABLE,
    errors.LimitExceededError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.SnapshotWriteError: grpc.StatusCode.INTERNAL,
    errors.TooManyRouteWatchersError: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def status_code_of(error: errors.NamesrvError) -> grpc.StatusCode:
    """The gRPC code of a domain error (INTERNAL for one not in STATUS_CODES)."""
    for cls in type(error).__mro__:
        if cls in STATUS_CODES:
            return STATUS_CODES[cls]
    return grpc.StatusCode.INTERNAL


def to_status(error: errors.NamesrvError) -> grpc.Status:
    """A domain error as a ``grpc.Status`` carrying ``google.rpc.Status`` + ``ErrorInfo``."""
    code = status_code_of(error)
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=error.message, details=[detail])
    result: grpc.Status = rpc_status.to_status(status)
    return result
