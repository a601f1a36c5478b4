"""Transport security and authorization: ACL file (acl), request signatures (signature), the
roles table and per-request check (authz), the audit trail (audit) and server TLS (tls). The
client credentials of the command-line programs are :mod:`namesrv_grpc.client.security`."""

OPEN_WARNING = (
    "no --acl-file: anyone who can reach the gRPC port (and the remoting port) may register or unregister "
    "brokers, change routes, write KV config and change the configuration; see docs/security.md"
)
"""What ``namesrv`` logs at start without an ACL (here, not in :mod:`.setup`, so that the supervisor
logs it without importing the ACL, TLS and gRPC modules it never uses)."""


class TlsFileError(Exception):
    """A certificate, key or CA file cannot be used; the message names the file and the problem
    (:mod:`.tls`)."""
