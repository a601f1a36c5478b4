"""Transport security and authorization: ACL file (acl), request signatures (signature), the
roles table and per-request check (authz), the audit trail (audit), server TLS (tls), and client
credentials for the command-line programs (client)."""
