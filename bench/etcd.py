"""etcd, the peer of the lookup benchmark: a single-member etcd (Debian's ``etcd-server``) on free
loopback ports, and the few messages of its gRPC API that the benchmark sends.

etcd's ``KV/Range`` reads one key; h2load drives it exactly as it drives our ``PickupTopicRoute``
(gRPC over h2c, one pre-serialized request body). Rather than compiling etcd's ``rpc.proto`` (which
imports gogoproto and Google API annotations), the four messages used are declared here from it,
field numbers and types as in etcd v3.4 ``etcdserver/etcdserverpb/rpc.proto`` and
``mvcc/mvccpb/kv.proto``; unused fields are left out (protobuf skips unknown fields):

- ``RangeRequest``: ``bytes key = 1; bool serializable = 7;``
- ``RangeResponse``: ``ResponseHeader header = 1; repeated KeyValue kvs = 2; bool more = 3; int64 count = 4;``
- ``PutRequest``: ``bytes key = 1; bytes value = 2;``  /  ``PutResponse``: ``ResponseHeader header = 1;``
- ``ResponseHeader``: ``uint64 cluster_id = 1; uint64 member_id = 2; int64 revision = 3; uint64 raft_term = 4;``
- ``KeyValue``: ``bytes key = 1; int64 create_revision = 2; int64 mod_revision = 3; int64 version = 4;
  bytes value = 5;``

A ``Range`` of key ``k`` is then the 5-byte gRPC prefix and ``0x0a <len> k`` (plus ``0x38 0x01`` for
a serializable read).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from bench.harness import BenchError, GrpcTarget, free_port

RANGE = "/etcdserverpb.KV/Range"
PUT = "/etcdserverpb.KV/Put"

_F = descriptor_pb2.FieldDescriptorProto


def _messages() -> dict[str, Any]:
    """Message classes of the etcd subset above, built from a descriptor (no generated code)."""
    file = descriptor_pb2.FileDescriptorProto(name="bench_etcd_subset.proto", package="etcdserverpb", syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        proto = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            added = proto.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                added.type_name = type_name

    one, many = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    message(
        "ResponseHeader",
        ("cluster_id", 1, _F.TYPE_UINT64, one, ""), ("member_id", 2, _F.TYPE_UINT64, one, ""),
        ("revision", 3, _F.TYPE_INT64, one, ""), ("raft_term", 4, _F.TYPE_UINT64, one, ""),
    )  # fmt: skip
    message(
        "KeyValue",
        ("key", 1, _F.TYPE_BYTES, one, ""), ("create_revision", 2, _F.TYPE_INT64, one, ""),
        ("mod_revision", 3, _F.TYPE_INT64, one, ""), ("version", 4, _F.TYPE_INT64, one, ""),
        ("value", 5, _F.TYPE_BYTES, one, ""),
    )  # fmt: skip
    message("RangeRequest", ("key", 1, _F.TYPE_BYTES, one, ""), ("serializable", 7, _F.TYPE_BOOL, one, ""))
    message(
        "RangeResponse",
        ("header", 1, _F.TYPE_MESSAGE, one, ".etcdserverpb.ResponseHeader"),
        ("kvs", 2, _F.TYPE_MESSAGE, many, ".etcdserverpb.KeyValue"),
        ("more", 3, _F.TYPE_BOOL, one, ""), ("count", 4, _F.TYPE_INT64, one, ""),
    )  # fmt: skip
    message("PutRequest", ("key", 1, _F.TYPE_BYTES, one, ""), ("value", 2, _F.TYPE_BYTES, one, ""))
    message("PutResponse", ("header", 1, _F.TYPE_MESSAGE, one, ".etcdserverpb.ResponseHeader"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    names = ("ResponseHeader", "KeyValue", "RangeRequest", "RangeResponse", "PutRequest", "PutResponse")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"etcdserverpb.{n}")) for n in names}


MESSAGES = _messages()


def range_request(key: bytes, *, serializable: bool = False) -> bytes:
    """A serialized ``RangeRequest`` of one key (linearizable, etcd's default, unless ``serializable``)."""
    return bytes(MESSAGES["RangeRequest"](key=key, serializable=serializable).SerializeToString())


def range_check(key: bytes, value: bytes) -> Callable[[bytes], None]:
    """A check that a ``RangeResponse`` holds exactly ``key`` = ``value``."""

    def check(raw: bytes) -> None:
        response = MESSAGES["RangeResponse"].FromString(raw)
        if response.count != 1 or len(response.kvs) != 1 or response.kvs[0].value != value:
            raise BenchError(f"etcd Range of {key!r}: count {response.count}, not the stored value")

    return check


@dataclass
class Etcd:
    """A running single-member etcd: its process and client address."""

    process: subprocess.Popen[bytes]
    address: str

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def metrics_url(self) -> str:
        return f"http://{self.address}/metrics"

    def put(self, key: bytes, value: bytes) -> None:
        with grpc.insecure_channel(self.address) as channel:
            channel.unary_unary(PUT)(MESSAGES["PutRequest"](key=key, value=value).SerializeToString(), timeout=10)

    def range_target(self, key: bytes, value: bytes, *, serializable: bool = False) -> GrpcTarget:
        kind = "serializable" if serializable else "linearizable"
        return GrpcTarget(
            f"etcd Range ({kind})", self.address, RANGE, range_request(key, serializable=serializable), self.pid,
            self.metrics_url, range_check(key, value),
        )  # fmt: skip


@contextmanager
def etcd() -> Iterator[Etcd]:
    """Start ``etcd`` (data in a temporary directory, client and peer URLs on free loopback ports);
    wait for ``/health``; stop it with SIGTERM afterwards. Raises BenchError when etcd is missing."""
    binary = shutil.which("etcd")
    if binary is None:
        raise BenchError("etcd not found: run scripts/install-bench-tools.sh (Debian etcd-server)")
    client, peer = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="etcd-bench-") as tmp:
        args = [
            binary, "--name", "bench", "--data-dir", f"{tmp}/data", "--listen-client-urls", f"http://{client}",
            "--advertise-client-urls", f"http://{client}", "--listen-peer-urls", f"http://{peer}",
            "--initial-advertise-peer-urls", f"http://{peer}", "--initial-cluster", f"bench=http://{peer}",
            "--log-level", "error", "--logger", "zap",
        ]  # fmt: skip
        with open(f"{tmp}/log", "wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(f"http://{client}/health", timeout=2) as response:
                        if b'"health":"true"' in response.read():
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"etcd did not become healthy: {Path(tmp, 'log').read_text()[-2000:]}")
                time.sleep(0.1)
            yield Etcd(process, client)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
