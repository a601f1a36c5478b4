"""Domain errors of the NameServer. The gRPC layer maps them to status codes in one place
(:mod:`namesrv_grpc.grpc_api.grpc_errors`); nothing here knows about gRPC.

::

    NamesrvError                    reason (UPPER_SNAKE)          gRPC code
    ├── InvalidFieldError           INVALID_FIELD                 INVALID_ARGUMENT (metadata: field)
    ├── MalformedBodyError          MALFORMED_BODY                INVALID_ARGUMENT
    ├── MalformedRequestError       MALFORMED_REQUEST             INVALID_ARGUMENT
    ├── BodyChecksumMismatchError   BODY_CHECKSUM_MISMATCH        DATA_LOSS
    ├── TopicRouteNotFoundError     TOPIC_ROUTE_NOT_FOUND         NOT_FOUND
    ├── BrokerNotRegisteredError    BROKER_NOT_REGISTERED         NOT_FOUND
    ├── BrokerNameNotRegisteredError BROKER_NAME_NOT_REGISTERED   NOT_FOUND
    ├── KVConfigNotFoundError       KV_CONFIG_NOT_FOUND           NOT_FOUND
    ├── StaleBrokerStateError       STALE_BROKER_STATE            FAILED_PRECONDITION
    ├── RegistrationRefusedError    REGISTRATION_REFUSED          FAILED_PRECONDITION
    ├── TopicListDisabledError      TOPIC_LIST_DISABLED           FAILED_PRECONDITION
    ├── ConfigKeyBlacklistedError   CONFIG_KEY_BLACKLISTED        PERMISSION_DENIED
    ├── AccessDeniedError           ACCESS_DENIED                 PERMISSION_DENIED (--acl-file)
    ├── BadSignatureError           BAD_SIGNATURE                 UNAUTHENTICATED (--acl-file)
    ├── ServiceWarmingUpError       NAMESRV_WARMING_UP            UNAVAILABLE
    ├── RouteTableUnavailableError  ROUTE_TABLE_UNAVAILABLE       UNAVAILABLE
    ├── LimitExceededError          LIMIT_EXCEEDED                RESOURCE_EXHAUSTED (metadata: limit)
    ├── TooManyRouteWatchersError   TOO_MANY_ROUTE_WATCHERS       RESOURCE_EXHAUSTED
    ├── PersistError                KV_CONFIG_PERSIST_FAILED      INTERNAL
    └── SnapshotWriteError          SNAPSHOT_WRITE_FAILED         INTERNAL
        └── SnapshotsNotInstalledError  (pyarrow missing)         INTERNAL (metadata: extra)

Every error is raised before any state changes: a rejected request changes nothing.
"""

from __future__ import annotations


class NamesrvError(Exception):
    """Base of every domain error. ``reason`` is the ``google.rpc.ErrorInfo.reason``;
    ``metadata`` its metadata (e.g. ``{"field": "broker_addr"}``)."""

    reason = "NAMESRV_ERROR"

    def __init__(self, message: str, metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata or {}

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled as class, message, metadata and attributes (errors of the route-table process
        reach the serving process whole, whatever the subclass's constructor takes)."""
        return _rebuild_error, (type(self), self.message, dict(self.metadata)), dict(self.__dict__)


def _rebuild_error(cls: type[NamesrvError], message: str, metadata: dict[str, str]) -> NamesrvError:
    error = cls.__new__(cls)
    NamesrvError.__init__(error, message, metadata)
    return error


class InvalidFieldError(NamesrvError):
    """A request field is missing or out of range; ``field`` names it (as in the .proto)."""

    reason = "INVALID_FIELD"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", {"field": field})
        self.field = field


class MalformedBodyError(NamesrvError):
    """A registration body cannot be decompressed or decoded (S01)."""

    reason = "MALFORMED_BODY"


class MalformedRequestError(NamesrvError):
    """A request (or session message) is not a valid protobuf message of its method."""

    reason = "MALFORMED_REQUEST"


class BodyChecksumMismatchError(NamesrvError):
    """The CRC32C of a registration body does not match ``body_crc32c`` (S01)."""

    reason = "BODY_CHECKSUM_MISMATCH"


class TopicRouteNotFoundError(NamesrvError):
    """A topic has no route (S18). The message is RocketMQ's own wording."""

    reason = "TOPIC_ROUTE_NOT_FOUND"

    def __init__(self, topic: str) -> None:
        super().__init__(f"No topic route info in name server for the topic: {topic}", {"topic": topic})


class BrokerNotRegisteredError(NamesrvError):
    """A heartbeat names a broker address that is not registered (S14); the broker should register."""

    reason = "BROKER_NOT_REGISTERED"


class BrokerNameNotRegisteredError(NamesrvError):
    """A request names a broker name with no BrokerData (S25)."""

    reason = "BROKER_NAME_NOT_REGISTERED"


class KVConfigNotFoundError(NamesrvError):
    """A KV config key is absent (S21)."""

    reason = "KV_CONFIG_NOT_FOUND"


class StaleBrokerStateError(NamesrvError):
    """A registration from a new address carries a lower stateVersion than the stored one (S12)."""

    reason = "STALE_BROKER_STATE"


class RegistrationRefusedError(NamesrvError):
    """RocketMQ 5.x: a broker's first registration (its id not registered under its name yet) carries
    exactly one topic, i.e. a topic-increment registration came before the full one; the broker must
    register its whole topic table first (``RouteInfoManager.registerBroker`` returns null,
    "register broker failed")."""

    reason = "REGISTRATION_REFUSED"


class TopicListDisabledError(NamesrvError):
    """RocketMQ 5.x: a topic list was asked for while ``enableAllTopicList`` (the list of every topic)
    or ``enableTopicList`` (the lists by cluster and unit flags) is false (remark ``disable``)."""

    reason = "TOPIC_LIST_DISABLED"


class ConfigKeyBlacklistedError(NamesrvError):
    """``UpdateNamesrvConfig`` names a key of ``configBlackList`` (S26)."""

    reason = "CONFIG_KEY_BLACKLISTED"


class LimitExceededError(NamesrvError):
    """Accepting the request would make stored state or a reply larger than a configured limit
    (``metadata["limit"]`` names the configuration key, e.g. ``kvConfigMaxTotalSize``)."""

    reason = "LIMIT_EXCEEDED"

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message, {"limit": limit})
        self.limit = limit


class AccessDeniedError(NamesrvError):
    """The ACL (``--acl-file``) does not allow this caller this request; nothing was changed."""

    reason = "ACCESS_DENIED"


class BadSignatureError(NamesrvError):
    """A request's signature is malformed, wrong, stale or names an unknown access key (``--acl-file``)."""

    reason = "BAD_SIGNATURE"


class PersistError(NamesrvError):
    """The KV config file could not be written; the change was not kept (S21)."""

    reason = "KV_CONFIG_PERSIST_FAILED"


class ServiceWarmingUpError(NamesrvError):
    """Route lookups are refused for ``waitSecondsForService`` after start (``needWaitForService``),
    so clients ask another NameServer instead of trusting a table brokers have not filled yet."""

    reason = "NAMESRV_WARMING_UP"


class RouteTableUnavailableError(NamesrvError):
    """The route-table process is gone (the NameServer is about to exit and be restarted): a write
    was not applied; the client should send it to another NameServer."""

    reason = "ROUTE_TABLE_UNAVAILABLE"


class SnapshotWriteError(NamesrvError):
    """A route snapshot could not be written into ``snapshotDir``; nothing of it is visible."""

    reason = "SNAPSHOT_WRITE_FAILED"


SNAPSHOTS_EXTRA = "snapshots"
"""The optional dependency set (``pip install 'namesrv-grpc[snapshots]'``) that adds pyarrow."""


class SnapshotsNotInstalledError(SnapshotWriteError, ImportError):
    """Route snapshots need pyarrow, which only the ``snapshots`` extra installs (``pip install
    namesrv-grpc`` and the default container image leave it out, 170 MB). Raised when
    :mod:`namesrv_grpc.snapshot` is imported without it, that is when a snapshot is first asked for;
    an ImportError too, for code that checks for optional modules that way. Metadata ``extra``: the
    extra to install."""

    def __init__(self, message: str = "", metadata: dict[str, str] | None = None) -> None:
        super().__init__(
            message
            or (
                "route snapshots need pyarrow, which is not installed: install the snapshots extra "
                f"(pip install 'namesrv-grpc[{SNAPSHOTS_EXTRA}]'; the container image: build it with "
                f"--build-arg EXTRAS={SNAPSHOTS_EXTRA})"
            ),
            metadata or {"extra": SNAPSHOTS_EXTRA},
        )


class TooManyRouteWatchersError(NamesrvError):
    """``routeWatchMaxWatchers`` route watches are open already; the client should watch another
    NameServer or try later."""

    reason = "TOO_MANY_ROUTE_WATCHERS"
