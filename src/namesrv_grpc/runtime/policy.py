"""Where work runs: how many serving processes, and what a serving process does off its event loop.

Every write is applied in the route-table process, one at a time, with no lookups on its loop to
keep waiting (:mod:`namesrv_grpc.processes`); a serving process frames, checks, decodes what a
write carries and answers reads from its replica. The pieces of work a request can make it do that
grow with what the client sends:

- a checksum over a registration body (up to ``remotingFrameMaxLength`` / ``grpcMaxMessageSize``,
  16 MiB): above :data:`OFF_LOOP_CHECKSUM_BYTES` it runs in a worker thread (zlib and google-crc32c
  release the GIL);
- decoding a registration body that is not the same as the broker's last one (a 10,000-topic Java
  body of 1.7 MB: ~30 ms), when it is plain and at most :data:`DOOR_DECODE_MAX_BYTES`
  (:func:`decoded_by_door`); above :data:`OFF_LOOP_DECODE_BYTES` in a worker thread, one at a time
  (:class:`OffLoopDecodes`). The Python part of the decoder gives the GIL up every
  ``sys.getswitchinterval()`` (5 ms), so the event loop goes on answering lookups between its
  slices; its C part (msgspec, ~40 % of the time) does not, which is why larger and compressed
  bodies go to the route-table process, where no lookup waits (a 100,000-topic compressed body a
  second decoded here: lookups p99 6.7 -> 19 ms, max 14 -> 160 ms, row 11a);
- with an ACL, the HMAC-SHA1 of a remoting request's signature, which covers its body (RocketMQ's
  ``AclClientRPCHook``): above :data:`OFF_LOOP_SIGNATURE_BYTES` it runs in a worker thread (hashlib
  releases the GIL for inputs over 2 KiB: measured here, the event loop's thread keeps 60-115 % of
  its speed while another thread computes the HMAC of 64 MiB). Only REGISTER_BROKER and
  UPDATE_NAMESRV_CONFIG may carry such a body: every other request code is refused by the size of
  its body before its signature is checked (:data:`namesrv_grpc.remoting.handlers.BODY_MAX_BYTES`).

so the loop goes on answering lookups meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from namesrv_grpc.core.commands import RawBody, RegisterBroker, RegistrationReply, RouteTableWrites, send_registration
from namesrv_grpc.wire.grpc_register_body import decode_protobuf_body
from namesrv_grpc.wire.remoting_register_body import decode_java_register_body

if TYPE_CHECKING:
    from namesrv_grpc.config import NamesrvConfig
    from namesrv_grpc.core.body import DecodedBody
    from namesrv_grpc.core.reader import NameServerReader

ResultT = TypeVar("ResultT")

OFF_LOOP_CHECKSUM_BYTES = 256 * 1024
"""A registration body larger than this is checksummed in a worker thread (about 0.1 ms of CRC32)."""


OFF_LOOP_SIGNATURE_BYTES = 256 * 1024
"""A remoting request whose body is larger than this has its signature's HMAC-SHA1 computed in a
worker thread (about 0.4 ms of HMAC; a wrong signature over a 16 MiB body held the event loop for
13 ms, p99 of lookups 118-185 ms under a stream of them). Request codes that carry no body are
refused a body larger than this before any signature is checked."""


def signature_off_loop(body: bytes | None) -> bool:
    """Whether the signature over ``body`` is checked in a worker thread (:data:`OFF_LOOP_SIGNATURE_BYTES`)."""
    return body is not None and len(body) > OFF_LOOP_SIGNATURE_BYTES


async def checksum(function: Callable[[bytes], int], body: bytes) -> int:
    """``function(body)`` (a CRC over the bytes), in a worker thread when ``body`` is large."""
    if len(body) > OFF_LOOP_CHECKSUM_BYTES:
        return await asyncio.to_thread(function, body)
    return function(body)


OFF_LOOP_DECODE_BYTES = 64 * 1024
"""A registration body larger than this is decoded in a worker thread (about 350 topics of Java
JSON, ~1-2 ms of decoding on the event loop below it)."""

DOOR_DECODE_MAX_BYTES = 2 * 1024 * 1024
"""The largest plain registration body a serving process decodes itself (~12,000 topics of Java
JSON: ~35 ms of decoding, ~15 ms of it in one C call); larger ones go to the route-table process."""


def decoded_by_door(size: int, compressed: bool) -> bool:
    """Whether a serving process decodes a registration body of ``size`` bytes itself: plain and at
    most :data:`DOOR_DECODE_MAX_BYTES`. A compressed body may inflate to
    ``registerBodyMaxInflatedSize`` (64 MiB), so the route-table process decodes it, one at a time
    for the whole server."""
    return not compressed and size <= DOOR_DECODE_MAX_BYTES


def decode_registration(protocol: str, raw: RawBody, config: NamesrvConfig, known_topics: int | None) -> DecodedBody:
    """A registration body decoded by the decoder of its door's wire format (``protocol`` "grpc":
    the protobuf body; "remoting": RocketMQ's JSON, plain or compressed) within
    ``registerBodyMaxInflatedSize`` and ``registerBodyMaxTopics``, skipping the topic table whose
    fingerprint is ``known_topics``. The doors and the route-table process decode with it. Raises
    MalformedBodyError, LimitExceededError."""
    limits = (config.register_body_max_inflated_size, config.register_body_max_topics, known_topics)
    if protocol == "grpc":
        return decode_protobuf_body(raw.body, raw.compressed, *limits)
    return decode_java_register_body(raw.body, raw.compressed, *limits, raw.rocketmq5)


class OffLoopDecodes:
    """Decodes of registration bodies in one serving process (both doors share it): one over
    :data:`OFF_LOOP_DECODE_BYTES` is decoded in a worker thread, one at a time, so that the event
    loop keeps half of the GIL (two decoding threads would leave it a third)."""

    def __init__(self) -> None:
        self._one_at_a_time = asyncio.Semaphore(1)

    async def run(self, size: int, function: Callable[..., ResultT], *args: Any) -> ResultT:
        """``function(*args)``, which decodes a body of ``size`` bytes; raises what it raises."""
        if size <= OFF_LOOP_DECODE_BYTES:
            return function(*args)
        async with self._one_at_a_time:
            return await asyncio.to_thread(function, *args)

    async def send_registration(
        self, writes: RouteTableWrites, command: RegisterBroker, raw: RawBody, nameserver: NameServerReader
    ) -> RegistrationReply:
        """Send a registration as both doors do (:func:`~namesrv_grpc.core.commands.send_registration`):
        when the route-table process asks for the body, decode it here (:func:`decode_registration`
        with ``nameserver``'s configuration then, :meth:`run`) if :func:`decoded_by_door`, else send it
        as it arrived (``raw``) for the route-table process to decode. Raises what the route-table
        process or the decoder raises."""

        async def decode(known_topics: int | None) -> DecodedBody:
            return await self.run(
                len(raw.body), decode_registration, command.protocol, raw, nameserver.config, known_topics
            )

        left = None if decoded_by_door(len(raw.body), raw.compressed) else raw
        return await send_registration(writes, command, decode, left, nameserver.registered_body(command.identity))


def share(limit: int, workers: int) -> int:
    """One serving process's part of a server-wide bound of ``limit`` (0 = unset: stays 0, each
    process then takes its own default): the bound divided among the ``workers`` serving processes,
    rounded up, at least 1. Used for what the kernel spreads over the processes (connections) and
    what they hold (bytes of unfinished frames): the server-wide total stays the configured one."""
    if limit <= 0:
        return limit
    return max(1, math.ceil(limit / workers))


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2: ``QUOTA PERIOD`` (``max`` = no quota) of this process's cgroup (a container's limit)."""
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def cgroup_cpu_limit(cpu_max: Path = CGROUP_CPU_MAX) -> float | None:
    """The CPUs this process's cgroup may use (quota / period, e.g. 2.0 for a pod with
    ``limits.cpu: 2``), or None when there is no quota (or no cgroup file to read)."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(CGROUP_V1_QUOTA.read_text())
        period_us = int(CGROUP_V1_PERIOD.read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


MAX_DEFAULT_WORKER_PROCESSES = 8
"""Most serving processes started by default (RocketMQ's ``serverWorkerThreads`` is 8 too): each one
holds a replica of the route table, so a container without a CPU limit on a 64-core node must not
start 64 of them. More only by setting ``serverWorkerProcesses``."""


def default_worker_processes(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """``serverWorkerProcesses`` when it is 0: the CPUs this process may run on
    (``os.sched_getaffinity``), at most the cgroup's CPU quota rounded up, at least 1 and at most
    :data:`MAX_DEFAULT_WORKER_PROCESSES`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(cpu_max)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, min(cpus, MAX_DEFAULT_WORKER_PROCESSES))
