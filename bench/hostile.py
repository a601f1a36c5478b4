"""Hostile requests against a real NameServer process, measured from outside (issue 10).

Each attack runs while a separate process looks a topic up in a loop; for each one this reports the
longest lookup (how long lookups were frozen), the lookups' p99, the server's peak resident memory
(``VmHWM`` of ``/proc/PID/status``) and the status the attacker got. ``python -m bench.hostile``
prints the table; ``PYTHONPATH`` decides which NameServer code runs (the server inherits it)::

    PYTHONPATH=$PWD/src .venv/bin/python -m bench.hostile            # this checkout
    PYTHONPATH=/other/checkout/src .venv/bin/python -m bench.hostile  # another one, to compare

The tests in ``tests/test_hostile_input.py`` run the same attacks with bounds a loaded machine
cannot break.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psutil

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv.v1 import types_pb2

ROOT = Path(__file__).resolve().parent.parent
PROBE_TOPIC = "ProbeTopic"
"""The topic the lookup prober asks for; registered by broker ``broker-probe`` before any attack."""
VICTIM_TOPIC = "VictimTopic"
"""A topic of the victim master ``broker-a`` that attacks aim at."""
MIB = 1024 * 1024
BIG = 256 * MIB
"""Send/receive limit of the attacker's channel (the server's own limit is what is tested)."""


def crc32c(data: bytes) -> int:
    import google_crc32c

    return int(google_crc32c.value(data))


def _topic_entry(name: str) -> bytes:
    """One serialized ``topic_config_table`` map entry (field 1 of RegisterBrokerBody)."""
    message = types_pb2.RegisterBrokerBody()
    message.topic_config_table[name].CopyFrom(
        types_pb2.TopicConfig(topic_name=name, read_queue_nums=4, write_queue_nums=4, perm=6)
    )
    return bytes(message.SerializeToString())


def compressed_repeats(entry: bytes, compressed_size: int) -> bytes:
    """A zlib stream of ``entry`` repeated until the compressed stream is about ``compressed_size``
    bytes (the decompressor's work per compressed byte is as high as zlib allows)."""
    compressor = zlib.compressobj(9)
    chunk = entry * max(1, MIB // len(entry))
    parts: list[bytes] = []
    size = 0
    while size < compressed_size:
        part = compressor.compress(chunk)
        parts.append(part)
        size += len(part)
    parts.append(compressor.flush())
    return b"".join(parts)


def register(
    body: bytes,
    *,
    compressed: bool,
    broker_name: str = "broker-evil",
    broker_id: int = 0,
    broker_addr: str = "127.0.0.1:20911",
    **fields: Any,
) -> ns_pb2.RegisterBrokerRequest:
    """A RegisterBrokerRequest carrying ``body`` with its correct checksum."""
    values: dict[str, Any] = {
        "cluster_name": "DefaultCluster",
        "broker_name": broker_name,
        "broker_id": broker_id,
        "broker_addr": broker_addr,
        "body": body,
        "body_crc32c": crc32c(body),
        "compressed": compressed,
    }
    values.update(fields)
    return ns_pb2.RegisterBrokerRequest(**values)


def legit_body(topics: list[str]) -> bytes:
    message = types_pb2.RegisterBrokerBody(data_version=types_pb2.DataVersion(state_version=0, timestamp=1, counter=1))
    for name in topics:
        message.topic_config_table[name].CopyFrom(
            types_pb2.TopicConfig(topic_name=name, read_queue_nums=8, write_queue_nums=8, perm=6)
        )
    return bytes(message.SerializeToString(deterministic=True))


# --------------------------------------------------------------------------- the attacks


@dataclass
class Stubs:
    ns: ns_grpc.NameServerServiceStub
    kv: kv_grpc.KVConfigServiceStub
    admin: admin_grpc.AdminServiceStub


Attack = Callable[[Stubs], list[str]]
"""Sends hostile requests; returns the status code name each one got (``OK`` when accepted)."""


def _call(function: Callable[[], object], timeout_note: list[str]) -> None:
    try:
        function()
        timeout_note.append("OK")
    except grpc.RpcError as error:
        timeout_note.append(error.code().name)


def attack_compressed_160k(stubs: Stubs) -> list[str]:
    """160 KiB of zlib that inflates to about 160 MiB of (repeated) topic entries."""
    body = compressed_repeats(_topic_entry("EvilTopic"), 160 * 1024)
    codes: list[str] = []
    _call(lambda: stubs.ns.RegisterBroker(register(body, compressed=True), timeout=120), codes)
    return codes


def distinct_topics_compressed(compressed_size: int) -> bytes:
    """A compressed body of as many distinct topics as fit in ``compressed_size`` zlib bytes."""
    count = compressed_size
    while True:
        body = zlib.compress(legit_body([f"T{i:x}" for i in range(count)]), 9)
        if abs(len(body) - compressed_size) <= compressed_size * 0.03:
            return body
        count = int(count * compressed_size / len(body)) + 1


def attack_compressed_160k_distinct(stubs: Stubs) -> list[str]:
    """160 KiB of zlib holding as many distinct topics as fit (each one lands in the route table)."""
    body = distinct_topics_compressed(160 * 1024)
    codes: list[str] = []
    _call(lambda: stubs.ns.RegisterBroker(register(body, compressed=True), timeout=300), codes)
    return codes


def attack_deflate_bomb(stubs: Stubs) -> list[str]:
    """1 MiB of zlib that inflates to about 1 GiB of zero bytes."""
    compressor = zlib.compressobj(9)
    zeros = bytes(16 * MIB)
    body = b"".join(compressor.compress(zeros) for _ in range(64)) + compressor.flush()
    codes: list[str] = []
    _call(lambda: stubs.ns.RegisterBroker(register(body, compressed=True), timeout=120), codes)
    return codes


def attack_zone_name(stubs: Stubs) -> list[str]:
    """A fake slave of the victim's broker name with a 5 MiB ``zone_name`` (it lands in every route
    of the victim's topics)."""
    codes: list[str] = []
    fake_slave: dict[str, Any] = {"broker_name": "broker-a", "broker_id": 1, "broker_addr": "127.0.0.1:30911"}
    request = register(b"", compressed=False, zone_name="z" * 5 * MIB, **fake_slave)
    _call(lambda: stubs.ns.RegisterBroker(request, timeout=60), codes)
    return codes


def attack_kv_order_value(stubs: Stubs) -> list[str]:
    """A 5 MiB ORDER_TOPIC_CONFIG value (it is sent back in every registration reply)."""
    codes: list[str] = []
    request = kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key=VICTIM_TOPIC, value="b:4;" * (5 * MIB // 4))
    _call(lambda: stubs.kv.PutKVConfig(request, timeout=60), codes)
    return codes


def huge_field_requests() -> list[tuple[str, Callable[[Stubs], object]]]:
    """(field, call) for 1 MiB in every string field a caller controls, one request each."""
    huge = "x" * MIB
    kv = kv_pb2.PutKVConfigRequest
    calls: list[tuple[str, Callable[[Stubs], object]]] = []

    def registering(request: ns_pb2.RegisterBrokerRequest) -> Callable[[Stubs], object]:
        return lambda s: s.ns.RegisterBroker(request, timeout=60)

    for name in ("cluster_name", "broker_name", "zone_name", "instance_id"):
        fields: dict[str, Any] = {name: huge}
        calls.append((name, registering(register(b"", compressed=False, **fields))))
    for name in ("broker_addr", "ha_server_addr"):
        fields = {name: f"{huge}:10911"}
        calls.append((name, registering(register(b"", compressed=False, **fields))))
    topic_request = register(legit_body([huge]), compressed=False)
    calls.append(("body topic name", lambda s: s.ns.RegisterBroker(topic_request, timeout=60)))
    filters = types_pb2.RegisterBrokerBody(filter_server_list=[f"{huge}:1"]).SerializeToString()
    filter_request = register(filters, compressed=False)
    calls.append(("body filter_server_list", lambda s: s.ns.RegisterBroker(filter_request, timeout=60)))
    lookup = ns_pb2.PickupTopicRouteRequest(topic=huge)
    calls.append(("lookup topic", lambda s: s.ns.PickupTopicRoute(lookup, timeout=60)))

    def putting(request: kv_pb2.PutKVConfigRequest) -> Callable[[Stubs], object]:
        return lambda s: s.kv.PutKVConfig(request, timeout=60)

    def updating(value: str) -> Callable[[Stubs], object]:
        request = admin_pb2.UpdateNamesrvConfigRequest(config={"snapshotNamesrvId": value})
        return lambda s: s.admin.UpdateNamesrvConfig(request, timeout=60)

    calls.append(("KV namespace", putting(kv(namespace=huge, key="k", value="v"))))
    calls.append(("KV key", putting(kv(namespace="ns", key=huge, value="v"))))
    calls.append(("KV value", putting(kv(namespace="ns", key="k", value=huge * 5))))
    calls.append(("config value with newline", updating("x\nconfigStorePath=/tmp/evil")))
    calls.append(("config value", updating(huge)))
    return calls


def attack_huge_fields(stubs: Stubs) -> list[str]:
    """1 MiB in every string field a caller controls, one request each."""
    codes: list[str] = []
    for _, call in huge_field_requests():
        _call(functools.partial(call, stubs), codes)
    return codes


def attack_max_request(stubs: Stubs) -> list[str]:
    """An uncompressed body just under 16 MiB of distinct minimal topics (about 1.3 million)."""
    entries = []
    size = 0
    index = 0
    while size < 15 * MIB + MIB // 2:
        name = f"t{index:x}"
        # key + value {topic_name} only: the smallest distinct entries a body can carry
        encoded = name.encode()
        field = b"\x0a" + _varint(len(encoded)) + encoded
        inner = field + b"\x12" + _varint(len(field)) + field
        entry = b"\x0a" + _varint(len(inner)) + inner
        entries.append(entry)
        size += len(entry)
        index += 1
    body = b"".join(entries)
    codes: list[str] = []
    _call(lambda: stubs.ns.RegisterBroker(register(body, compressed=False), timeout=300), codes)
    return codes


def attack_legit_100k(stubs: Stubs) -> list[str]:
    """Not an attack: the largest legitimate registration (100,000 topics, compressed), for comparison."""
    body = zlib.compress(legit_body([f"Topic-{i:06d}" for i in range(100_000)]))
    codes: list[str] = []
    request = register(body, compressed=True, broker_name="broker-big", broker_addr="127.0.0.1:40911")
    _call(lambda: stubs.ns.RegisterBroker(request, timeout=300), codes)
    return codes


def attack_max_accepted(stubs: Stubs) -> list[str]:
    """The most one registration may store: 200,000 topics (``registerBodyMaxTopics``) with names of
    117 characters, about 52 MiB inflated (under ``registerBodyMaxInflatedSize``), compressed."""
    body = zlib.compress(legit_body([f"{'x' * 110}{i:07d}" for i in range(200_000)]), 1)
    codes: list[str] = []
    request = register(body, compressed=True, broker_name="broker-max", broker_addr="127.0.0.1:50911")
    _call(lambda: stubs.ns.RegisterBroker(request, timeout=600), codes)
    return codes


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


ATTACKS: dict[str, Attack] = {
    "compressed-160KiB": attack_compressed_160k,
    "compressed-160KiB-distinct": attack_compressed_160k_distinct,
    "deflate-bomb-1MiB": attack_deflate_bomb,
    "zone-name-5MiB": attack_zone_name,
    "kv-order-value-5MiB": attack_kv_order_value,
    "huge-fields": attack_huge_fields,
    "max-request-16MiB": attack_max_request,
    "legit-100k-topics": attack_legit_100k,
    "max-accepted-200k-topics": attack_max_accepted,
}


# --------------------------------------------------------------------------- measuring


def peak_rss_bytes(pid: int) -> int:
    """``VmHWM`` (peak resident set size) of a process and every process under it, summed, in bytes."""
    return _status_sum(pid, "VmHWM")


def rss_bytes(pid: int) -> int:
    """``VmRSS`` of a process and every process under it, summed, in bytes."""
    return _status_sum(pid, "VmRSS")


def _status_sum(pid: int, field: str) -> int:
    total = 0
    for one in _tree_pids(pid):
        with contextlib.suppress(OSError):
            match = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{one}/status").read_text())
            if match is not None:
                total += int(match.group(1)) * 1024
    return total


@dataclass
class Probe:
    """Lookups made by a separate process during an attack."""

    count: int
    failed: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@contextmanager
def probing(address: str) -> Iterator[list[Probe]]:
    """Look ``PROBE_TOPIC`` up in a loop from another process for the ``with`` block; the list it
    yields holds the Probe afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.hostile", "--probe", address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    ready = process.stdout.readline()
    if ready.strip() != "ready":
        process.kill()
        raise RuntimeError(f"probe did not start: {ready!r}")
    result: list[Probe] = []
    try:
        yield result
    finally:
        process.stdin.write("stop\n")
        process.stdin.flush()
        data = json.loads(process.stdout.readline())
        process.wait(60)
        result.append(Probe(**data))


def _probe_main(address: str) -> None:
    import threading

    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    latencies: list[float] = []
    failed = 0
    with grpc.insecure_channel(address) as channel:
        stub = ns_grpc.NameServerServiceStub(channel)
        request = ns_pb2.PickupTopicRouteRequest(topic=PROBE_TOPIC)
        for _ in range(20):
            stub.PickupTopicRoute(request, timeout=10)
        print("ready", flush=True)
        while not stop.is_set():
            started = time.perf_counter()
            try:
                stub.PickupTopicRoute(request, timeout=300)
            except grpc.RpcError:
                failed += 1
            latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(0.002)
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p / 100))], 2) if latencies else 0.0

    print(
        json.dumps(
            {
                "count": len(latencies),
                "failed": failed,
                "p50_ms": pct(50),
                "p99_ms": pct(99),
                "max_ms": round(latencies[-1], 2) if latencies else 0.0,
            }
        ),
        flush=True,
    )


@dataclass
class AttackResult:
    name: str
    codes: list[str]
    seconds: float
    probe: Probe
    peak_rss_before_mib: float
    peak_rss_after_mib: float
    rss_after_mib: float
    alive: bool

    def row(self) -> str:
        codes = ",".join(sorted(set(self.codes)))
        return (
            f"| {self.name} | {codes} | {self.seconds:.2f} | {self.probe.max_ms:.1f} | {self.probe.p99_ms:.1f} | "
            f"{self.probe.count} | {self.peak_rss_before_mib:.0f} -> {self.peak_rss_after_mib:.0f} | "
            f"{'yes' if self.alive else 'NO'} |"
        )


def stubs_for(channel: grpc.Channel) -> Stubs:
    return Stubs(
        ns_grpc.NameServerServiceStub(channel),
        kv_grpc.KVConfigServiceStub(channel),
        admin_grpc.AdminServiceStub(channel),
    )


def prepare(stubs: Stubs) -> None:
    """The probe's broker and topic, and the victim master ``broker-a`` with VICTIM_TOPIC."""
    for topic, broker_name, addr in (
        (PROBE_TOPIC, "broker-probe", "127.0.0.1:10999"),
        (VICTIM_TOPIC, "broker-a", "127.0.0.1:10911"),
    ):
        request = register(legit_body([topic]), compressed=False, broker_name=broker_name, broker_addr=addr)
        stubs.ns.RegisterBroker(request, timeout=30)


def run_attack(address: str, pid: int, name: str, attack: Attack) -> AttackResult:
    """Run one attack against the server at ``address`` (process ``pid``) while probing lookups."""
    options = [("grpc.max_send_message_length", BIG), ("grpc.max_receive_message_length", BIG)]
    with grpc.insecure_channel(address, options=options) as channel:
        stubs = stubs_for(channel)
        before = peak_rss_bytes(pid)
        with probing(address) as probe:
            time.sleep(0.3)
            started = time.perf_counter()
            codes = attack(stubs)
            seconds = time.perf_counter() - started
            time.sleep(0.3)
        alive = True
        try:
            stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=PROBE_TOPIC), timeout=30)
        except grpc.RpcError:
            alive = False
        return AttackResult(
            name, codes, seconds, probe[0], before / MIB, peak_rss_bytes(pid) / MIB, rss_bytes(pid) / MIB, alive
        )


def compare_table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """A markdown table of two runs (``--json`` output), attack by attack."""
    by_name = {r["name"]: r for r in before}
    lines = [
        "| attack | status before → after | longest lookup ms (freeze) | lookup p99 ms | peak RSS growth MiB |",
        "|---|---|---|---|---|",
    ]
    for new in after:
        old = by_name.get(new["name"])
        if old is None:
            continue

        def codes(r: dict[str, Any]) -> str:
            return ",".join(sorted(set(r["codes"])))

        def growth(r: dict[str, Any]) -> float:
            return float(r["peak_rss_after_mib"] - r["peak_rss_before_mib"])

        was, now = old["probe"], new["probe"]
        lines.append(
            f"| {new['name']} | {codes(old)} → {codes(new)} | {was['max_ms']:.0f} → {now['max_ms']:.0f} | "
            f"{was['p99_ms']:.1f} → {now['p99_ms']:.1f} | {growth(old):.0f} → {growth(new):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--only", help="comma-separated attack names")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="print a before/after table from two --json files (runs nothing)",
    )
    args = parser.parse_args(argv)
    if args.probe:
        _probe_main(args.probe)
        return 0
    if args.compare:
        print(compare_table(*(json.loads(path.read_text()) for path in args.compare)))
        return 0
    from bench.harness import namesrv

    names = args.only.split(",") if args.only else list(ATTACKS)
    results = []
    print("| attack | status | seconds | longest lookup ms | lookup p99 ms | lookups | peak RSS MiB | alive |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        # A fresh server per attack: peak RSS and state of one attack do not leak into the next.
        with namesrv() as server:
            with server.channel() as channel:
                prepare(stubs_for(channel))
            result = run_attack(server.address, server.process.pid, name, ATTACKS[name])
        results.append(result)
        print(result.row(), flush=True)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"probe": r.probe.__dict__} for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _tree_pids(pid: int) -> list[int]:
    """``pid`` and every live process under it (``namesrv``'s route-table and serving processes)."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [pid]
