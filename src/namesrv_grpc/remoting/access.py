"""The ACL on the remoting port: what each request code asks (:data:`REQUEST_ACTIONS`, the remoting
twin of the ``guard.require`` line in every gRPC servicer method), the caller's identity (RocketMQ 4.x
``AccessKey``/``Signature`` ext fields, a TLS client certificate, ``globalWhiteRemoteAddresses``),
and the audit line of every state-changing request that succeeded (except a REGISTER_BROKER that
changed nothing, see :class:`.handlers.Unchanged`).

A refused request is answered ``NO_PERMISSION`` (16) with a remark naming the problem, as RocketMQ's
ACL does (``AclException`` -> ``NO_PERMISSION``), and is not handled at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode
from namesrv_grpc.remoting.connection import RemotingConnection
from namesrv_grpc.security.authz import REQUIRED_ROLE, Action, Guard, Principal, Role

REQUEST_ACTIONS: Mapping[int, tuple[Action, str | None]] = {
    RequestCode.PUT_KV_CONFIG: (Action.WRITE_KV, None),
    RequestCode.DELETE_KV_CONFIG: (Action.WRITE_KV, None),
    RequestCode.GET_KV_CONFIG: (Action.READ_KV, None),
    RequestCode.GET_KVLIST_BY_NAMESPACE: (Action.READ_KV, None),
    RequestCode.REGISTER_BROKER: (Action.REGISTER_BROKER, "brokerName"),
    RequestCode.UNREGISTER_BROKER: (Action.UNREGISTER_BROKER, "brokerName"),
    RequestCode.BROKER_HEARTBEAT: (Action.BROKER_HEARTBEAT, "brokerName"),
    RequestCode.QUERY_DATA_VERSION: (Action.QUERY_DATA_VERSION, "brokerName"),
    RequestCode.GET_ROUTEINFO_BY_TOPIC: (Action.READ_ROUTES, None),
    RequestCode.GET_BROKER_CLUSTER_INFO: (Action.READ_ROUTES, None),
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: (Action.READ_ROUTES, None),
    RequestCode.GET_TOPICS_BY_CLUSTER: (Action.READ_ROUTES, None),
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: (Action.READ_ROUTES, None),
    RequestCode.GET_UNIT_TOPIC_LIST: (Action.READ_ROUTES, None),
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: (Action.READ_ROUTES, None),
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: (Action.READ_ROUTES, None),
    RequestCode.GET_BROKER_MEMBER_GROUP: (Action.READ_ROUTES, None),
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: (Action.ADMIN_WRITE, None),
    RequestCode.ADD_WRITE_PERM_OF_BROKER: (Action.ADMIN_WRITE, None),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: (Action.ADMIN_WRITE, None),
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: (Action.ADMIN_WRITE, None),
    RequestCode.GET_NAMESRV_CONFIG: (Action.ADMIN_READ, None),
    RequestCode.UPDATE_NAMESRV_CONFIG: (Action.UPDATE_CONFIG, None),
}
"""request code -> (action, ext field naming the broker for broker actions)."""

AUDITED_ACTIONS = frozenset(
    {
        Action.REGISTER_BROKER,
        Action.UNREGISTER_BROKER,
        Action.WRITE_KV,
        Action.ADMIN_WRITE,
        Action.UPDATE_CONFIG,
    }
)
"""State-changing requests (heartbeats and QUERY_DATA_VERSION only refresh liveness; so does a
REGISTER_BROKER with nothing new, which its handler answers unaudited)."""

AUDIT_FIELDS = ("clusterName", "brokerName", "brokerId", "brokerAddr", "topic", "namespace", "key", "bodyCrc32")
"""Ext fields copied into a remoting audit line (never values, bodies or signatures). A registration's
``bodyCrc32`` and its body's size tell two registrations of one broker apart (a changed topic table),
which would otherwise be identical events (``auditRepeatWindowSeconds``)."""


def authorize(
    guard: Guard, request: RemotingCommand, connection: RemotingConnection
) -> Principal | Awaitable[Principal] | None:
    """Identify the caller of ``request`` and check its action; return the principal (None when no
    ACL is loaded, or for a request code outside the table). Raises BadSignatureError or
    AccessDeniedError before anything is handled. When the signature covers a body larger than
    :data:`~namesrv_grpc.runtime.policy.OFF_LOOP_SIGNATURE_BYTES`, its HMAC is computed in a worker thread:
    an awaitable of the principal is returned, raising the same errors."""
    if guard.acl is None:
        return None
    entry = REQUEST_ACTIONS.get(request.code)
    if entry is None:
        return None
    action, broker_field = entry
    identity = guard.identify_remoting(
        connection.peer_ip, request.ext_fields, request.body or None, connection.peer_certificate
    )
    broker_name = request.ext_fields.get(broker_field, "") if broker_field else ""
    peer = f"remoting:{connection.peer}"
    if isinstance(identity, Principal):
        guard.check(identity, action, broker_name, peer=peer)
        return identity
    return _checked(guard, identity, action, broker_name, peer)


async def _checked(
    guard: Guard, identity: Awaitable[Principal], action: Action, broker_name: str, peer: str
) -> Principal:
    principal = await identity
    guard.check(principal, action, broker_name, peer=peer)
    return principal


def audit(guard: Guard, request: RemotingCommand, connection: RemotingConnection, principal: Principal | None) -> None:
    """The audit line of a state-changing request that succeeded."""
    entry = REQUEST_ACTIONS.get(request.code)
    if entry is None or entry[0] not in AUDITED_ACTIONS:
        return
    changed: dict[str, object] = {k: request.ext_fields[k] for k in AUDIT_FIELDS if k in request.ext_fields}
    if request.code in (RequestCode.UPDATE_NAMESRV_CONFIG, RequestCode.REGISTER_BROKER):
        changed["body_bytes"] = len(request.body or b"")
    name = principal.name if principal is not None else "anonymous"
    guard.audit_log.ok(name, f"remoting:{connection.peer}", RequestCode(request.code).name, **changed)


def is_read(code: int) -> bool:
    """Whether a request code only reads (used by tests and docs)."""
    entry = REQUEST_ACTIONS.get(code)
    return entry is not None and REQUIRED_ROLE[entry[0]] is Role.READ
