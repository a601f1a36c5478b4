"""Who may do what (``--acl-file``): callers' identities, the roles table, and the check every
servicer method makes before it touches anything.

Each handler calls ``caller = guard.require(context, Action.X, broker_name=...)`` first: an explicit
line per method rather than an interceptor, so it costs one attribute test when no ACL is loaded.

Identity, first that applies:

1. the peer's address matches ``globalWhiteRemoteAddresses``: may do everything (RocketMQ's meaning);
2. a signature (gRPC ``authorization`` + ``x-mq-date-time``; remoting ``AccessKey``/``Signature``):
   its account, or ``UNAUTHENTICATED``/``BAD_SIGNATURE`` when it does not verify;
3. an mTLS client certificate whose subject is an account's ``certificateSubject``: that account;
4. anonymous.

What each may do (:data:`REQUIRED_ROLE`)::

    role     actions                                                  who has it
    READ     route lookups, topic lists, cluster info, KV reads       every account; anonymous when anonymousRead
    BROKER   RegisterBroker, UnregisterBroker, BrokerHeartbeat,       accounts whose brokerNames hold the
             QueryDataVersion, OpenBrokerSession                      request's broker name
    ADMIN    AdminService (incl. GetNamesrvConfig), KV writes,        admin accounts
             UpdateNamesrvConfig, ExportRouteSnapshot

Admin accounts and white-listed addresses may do everything. Refusals raise
:class:`~namesrv_grpc.core.errors.AccessDeniedError` (``PERMISSION_DENIED``/``ACCESS_DENIED``; remoting
``NO_PERMISSION``) before anything is applied, and are counted in ``namesrv_auth_refusals_total``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from namesrv_grpc.core.errors import AccessDeniedError, BadSignatureError
from namesrv_grpc.runtime.policy import signature_off_loop
from namesrv_grpc.security.acl import Account, AclConfig, subject_key
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.signature import (
    AUTHORIZATION_KEY,
    DATE_TIME_KEY,
    SignatureError,
    SignatureVerifier,
)

log = logging.getLogger(__name__)


class Role(enum.Enum):
    """What an action needs."""

    READ = "read"
    BROKER = "broker"
    ADMIN = "admin"


class Action(enum.Enum):
    """Everything a caller can ask, grouped as the ACL sees it. Values name them in audit lines."""

    REGISTER_BROKER = "RegisterBroker"
    UNREGISTER_BROKER = "UnregisterBroker"
    BROKER_HEARTBEAT = "BrokerHeartbeat"
    QUERY_DATA_VERSION = "QueryDataVersion"
    OPEN_BROKER_SESSION = "OpenBrokerSession"
    READ_ROUTES = "ReadRoutes"
    READ_KV = "ReadKVConfig"
    WRITE_KV = "WriteKVConfig"
    ADMIN_READ = "AdminRead"
    ADMIN_WRITE = "AdminWrite"
    UPDATE_CONFIG = "UpdateNamesrvConfig"
    EXPORT_SNAPSHOT = "ExportRouteSnapshot"


REQUIRED_ROLE: Mapping[Action, Role] = {
    Action.REGISTER_BROKER: Role.BROKER,
    Action.UNREGISTER_BROKER: Role.BROKER,
    Action.BROKER_HEARTBEAT: Role.BROKER,
    Action.QUERY_DATA_VERSION: Role.BROKER,
    Action.OPEN_BROKER_SESSION: Role.BROKER,
    Action.READ_ROUTES: Role.READ,
    Action.READ_KV: Role.READ,
    Action.WRITE_KV: Role.ADMIN,
    Action.ADMIN_READ: Role.ADMIN,
    Action.ADMIN_WRITE: Role.ADMIN,
    Action.UPDATE_CONFIG: Role.ADMIN,
    Action.EXPORT_SNAPSHOT: Role.ADMIN,
}
"""The roles table: the role each action needs."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from. ``name``: ``anonymous``, ``white:ADDRESS``, ``ak:KEY`` or
    ``cert:SUBJECT`` (audit lines and logs)."""

    name: str
    account: Account | None = None
    white: bool = False


ANONYMOUS = Principal("anonymous")


def allowed(acl: AclConfig, principal: Principal, action: Action, broker_name: str = "") -> bool:
    """Whether the roles table lets ``principal`` do ``action`` (on ``broker_name`` for broker actions)."""
    if principal.white:
        return True
    account = principal.account
    if account is not None and account.admin:
        return True
    role = REQUIRED_ROLE[action]
    if role is Role.READ:
        return account is not None or acl.anonymous_read
    if role is Role.BROKER:
        return account is not None and broker_name in account.broker_names
    return False


class RefusalCounter(Protocol):
    """``namesrv_auth_refusals_total`` (labels: reason)."""

    def labels(self, reason: str) -> Any: ...


def grpc_peer_address(peer: str) -> str:
    """The IP of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); the string itself otherwise."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = rest.rsplit(":", 1)[0]
        return host.strip("[]")
    return peer


class Guard:
    """The check before every request. Without an ACL everything is allowed (as RocketMQ's
    NameServer does); state-changing calls are audited either way."""

    _CERT_CACHE_SIZE = 256

    def __init__(self, acl: AclConfig | None, audit: AuditLog, refusals: RefusalCounter | None = None) -> None:
        self._acl = acl
        self.audit_log = audit
        self._refusals = refusals
        self._verifier = self._make_verifier(acl)
        self._subjects: OrderedDict[bytes, Account | None] = OrderedDict()

    @staticmethod
    def _make_verifier(acl: AclConfig | None) -> SignatureVerifier | None:
        if acl is None:
            return None
        return SignatureVerifier(acl.secret_of, skew_seconds=acl.date_time_skew_seconds)

    @property
    def acl(self) -> AclConfig | None:
        """The ACL in force (None = open)."""
        return self._acl

    def reload(self, acl: AclConfig) -> None:
        """Put a newly loaded ACL in force (SIGHUP); pinned time-zone offsets start afresh."""
        self._acl = acl
        self._verifier = self._make_verifier(acl)
        self._subjects.clear()

    def require(self, context: Any, action: Action, broker_name: str = "") -> Principal:
        """Identify the caller of a gRPC call and check ``action``; return who it is.

        Raises BadSignatureError (signature present but not valid) or AccessDeniedError; either
        way nothing has been done yet. ``context`` is a ``grpc.aio.ServicerContext``.
        """
        acl = self._acl
        if acl is None:
            return ANONYMOUS
        principal = self.identify_grpc(context)
        self.check(principal, action, broker_name, peer=context.peer())
        return principal

    def may_open_broker_sessions(self, principal: Principal) -> bool:
        """Whether ``principal`` may open a broker session for some broker name (without an ACL,
        anyone): a caller that may not is refused when it opens the stream, not after its hello."""
        acl = self._acl
        if acl is None or principal.white:
            return True
        account = principal.account
        return account is not None and (account.admin or bool(account.broker_names))

    def audit(self, context: Any, principal: Principal, rpc: str, **changed: object) -> None:
        """Write the audit line of an applied state-changing gRPC call (see :mod:`.audit`)."""
        self.audit_log.ok(principal.name, context.peer(), rpc, **changed)

    def identify_grpc(self, context: Any) -> Principal:
        """The principal of a gRPC call (see the module). Raises BadSignatureError."""
        acl = self._acl
        if acl is None:
            return ANONYMOUS
        if acl.white_addresses:
            address = grpc_peer_address(context.peer())
            if acl.is_white(address):
                return Principal(f"white:{address}", white=True)
        authorization = date_time = None
        for key, value in context.invocation_metadata() or ():
            if key == AUTHORIZATION_KEY:
                authorization = value
            elif key == DATE_TIME_KEY:
                date_time = value
        if authorization is not None:
            return self._signed(acl, lambda v: v.verify_grpc(str(authorization), date_time and str(date_time)))
        pem = (context.auth_context() or {}).get("x509_pem_cert")
        if pem:
            account = self._account_of_certificate(acl, pem[0], der=False)
            if account is not None:
                return Principal(account.name, account)
        return ANONYMOUS

    def identify_remoting(
        self, peer_ip: str, ext_fields: Mapping[str, str], body: bytes | None, peer_cert_der: bytes | None
    ) -> Principal | Awaitable[Principal]:
        """The principal of a remoting request. Raises BadSignatureError. A signature over a body
        larger than :data:`~namesrv_grpc.runtime.policy.OFF_LOOP_SIGNATURE_BYTES` is checked in a worker
        thread: an awaitable of the principal is returned (it raises BadSignatureError)."""
        acl = self._acl
        if acl is None:
            return ANONYMOUS
        if acl.white_addresses and acl.is_white(peer_ip):
            return Principal(f"white:{peer_ip}", white=True)
        if "AccessKey" in ext_fields:
            if signature_off_loop(body):
                return self._signed_off_loop(acl, ext_fields, body)
            return self._signed(acl, lambda v: v.verify_remoting(ext_fields, body))
        if peer_cert_der:
            account = self._account_of_certificate(acl, peer_cert_der, der=True)
            if account is not None:
                return Principal(account.name, account)
        return ANONYMOUS

    def check(self, principal: Principal, action: Action, broker_name: str = "", *, peer: str = "") -> None:
        """Raise AccessDeniedError (counted; audited when ``action`` changes state) unless allowed."""
        acl = self._acl
        if acl is None or allowed(acl, principal, action, broker_name):
            return
        self._count("access_denied")
        target = f" {broker_name!r}" if REQUIRED_ROLE[action] is Role.BROKER else ""
        if REQUIRED_ROLE[action] is not Role.READ:
            self.audit_log.refused(principal.name, peer, action.value, "ACCESS_DENIED", broker_name=broker_name)
        raise AccessDeniedError(
            f"{principal.name} may not {action.value}{target} (--acl-file)", {"action": action.value}
        )

    def _signed(self, acl: AclConfig, verify: Any) -> Principal:
        assert self._verifier is not None
        try:
            access_key: str = verify(self._verifier)
        except SignatureError as exc:
            self._count(exc.kind)
            raise BadSignatureError(exc.message, {"problem": exc.kind}) from None
        account = acl.by_access_key[access_key]
        return Principal(account.name, account)

    async def _signed_off_loop(self, acl: AclConfig, ext_fields: Mapping[str, str], body: bytes | None) -> Principal:
        """:meth:`_signed` for a remoting signature over a large body: the HMAC in a worker thread."""
        verifier = self._verifier
        assert verifier is not None
        try:
            access_key = await asyncio.to_thread(verifier.verify_remoting, ext_fields, body)
        except SignatureError as exc:
            self._count(exc.kind)
            raise BadSignatureError(exc.message, {"problem": exc.kind}) from None
        assert access_key is not None  # the request carries AccessKey
        account = acl.by_access_key[access_key]
        return Principal(account.name, account)

    def _account_of_certificate(self, acl: AclConfig, data: bytes, *, der: bool) -> Account | None:
        if data in self._subjects:
            self._subjects.move_to_end(data)
            return self._subjects[data]
        from cryptography import x509  # loaded only when a client certificate is checked against the ACL

        try:
            cert = x509.load_der_x509_certificate(data) if der else x509.load_pem_x509_certificate(data)
            account = acl.by_subject.get(subject_key(cert.subject))
        except ValueError:
            account = None
        self._subjects[data] = account
        if len(self._subjects) > self._CERT_CACHE_SIZE:
            self._subjects.popitem(last=False)
        return account

    def _count(self, reason: str) -> None:
        if self._refusals is not None:
            self._refusals.labels(reason).inc()
