"""Container health check of a NameServer through gRPC health checking (grpc.health.v1).

Usage: grpc-health-check [--tls-ca-file FILE [--tls-cert-file FILE --tls-key-file FILE]
                          [--tls-server-name NAME]] [HOST:PORT] [SERVICE]
       (defaults: 127.0.0.1:8081, "" = the whole server; plaintext unless a --tls-* flag is given)

Prints the serving status and exits 0 when it is SERVING, 1 otherwise (NOT_SERVING while draining
on SIGTERM, or no answer within 2 s), 2 for bad arguments. The image's HEALTHCHECK runs it;
Kubernetes uses its native ``grpc`` probes instead, which cannot speak TLS: with TLS on, point them
at the plaintext health-only port (``namesrv --health-port``) or run this script as an ``exec``
probe with ``--tls-ca-file`` (and a client certificate under mTLS).
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _read(parser: argparse.ArgumentParser, path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        parser.error(f"{path}: {exc.strerror or exc}")
    return None  # not reached


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="grpc-health-check", description="gRPC health check of a NameServer")
    parser.add_argument("address", nargs="?", default="127.0.0.1:8081", help="HOST:PORT (default 127.0.0.1:8081)")
    parser.add_argument("service", nargs="?", default="", help='service name (default "" = the whole server)')
    parser.add_argument("--tls-ca-file", help="CA certificates (PEM) to trust the server by; TLS on")
    parser.add_argument("--tls-cert-file", help="client certificate (PEM), for servers that require one")
    parser.add_argument("--tls-key-file", help="private key (PEM) of --tls-cert-file")
    parser.add_argument("--tls-server-name", help="name expected in the server's certificate")
    args = parser.parse_args(argv[1:])
    if (args.tls_cert_file is None) != (args.tls_key_file is None):
        parser.error("--tls-cert-file and --tls-key-file go together")
    tls = any((args.tls_ca_file, args.tls_cert_file, args.tls_server_name))
    try:
        if tls:
            credentials = grpc.ssl_channel_credentials(
                _read(parser, args.tls_ca_file), _read(parser, args.tls_key_file), _read(parser, args.tls_cert_file)
            )
            options = [("grpc.ssl_target_name_override", args.tls_server_name)] if args.tls_server_name else []
            channel = grpc.secure_channel(args.address, credentials, options=options)
        else:
            channel = grpc.insecure_channel(args.address)
        with channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=2
            )
    except grpc.RpcError as error:
        print(f"{args.address}: {error.code().name}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    print(f"{args.address} {args.service or '(server)'}: {status}")
    return 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1


def run() -> None:
    """The console script's entry point."""
    raise SystemExit(main(sys.argv))


if __name__ == "__main__":
    run()
