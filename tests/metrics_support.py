"""Helpers of the metrics and deployment tests: free ports, scraping /metrics over HTTP, and the
prometheus / promtool binaries."""

from __future__ import annotations

import os
import shutil
import socket
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

_EPHEMERAL_PORTS = "/proc/sys/net/ipv4/ip_local_port_range"
_LOWEST_CHOSEN = 10_000
_HIGHEST_CHOSEN = 19_999
_ports_taken: set[int] = set()


def worker_port_range(low: int, high: int) -> tuple[int, int]:
    """This pytest process's slice ``[low', high')`` of the ports ``[low, high)``: under pytest-xdist
    each worker (``PYTEST_XDIST_WORKER`` gw0, gw1, ... of ``PYTEST_XDIST_WORKER_COUNT``) gets its own
    slice, so two workers never pick the same free port in the moment before their servers bind it;
    without xdist, the whole range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return low, high
    index = int(worker[2:]) % count
    width = (high - low) // count
    return low + index * width, low + (index + 1) * width


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts with an explicit
    port. Taken below the kernel's ephemeral range where there is room: a port the kernel hands out
    (``bind(0)``) can be given to some client connection's end before the server binds it (a fresh-
    clone CI run once failed with "Address already in use" on such a metrics port). Not returned
    twice by this test process."""
    ephemeral_low = 0
    try:
        with open(_EPHEMERAL_PORTS) as ranges:
            ephemeral_low = int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    # 10,000-19,999: below the usual ephemeral range (32,768) and the blocks of
    # rocketmq_support.free_port_block (20,000-32,000).
    high = min(ephemeral_low, _HIGHEST_CHOSEN + 1)
    if high > _LOWEST_CHOSEN + 1_000:
        low, high = worker_port_range(_LOWEST_CHOSEN, high)
        span = high - low
        start = (os.getpid() * 7919) % span
        for offset in range(span):
            port = low + (start + offset) % span
            if port in _ports_taken:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _ports_taken.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Scrape:
    """One scrape of a /metrics page: family types by family name, and every sample."""

    types: Mapping[str, str]
    samples: tuple[Sample, ...]

    def find(self, name: str, **labels: str) -> list[Sample]:
        """Samples named ``name`` whose labels include ``labels``."""
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        """The value of the one sample named ``name`` with (at least) ``labels``."""
        found = self.find(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples: {found[:5]}"
        return found[0].value

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples named ``name`` with (at least) ``labels``: 0 when there is none yet
        (a labelled series appears when first counted)."""
        return sum(s.value for s in self.find(name, **labels))

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def parse(text: str) -> Scrape:
    types: dict[str, str] = {}
    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        samples.extend(Sample(s.name, dict(s.labels), s.value) for s in family.samples)
    return Scrape(types, tuple(samples))


def fetch(url: str, timeout: float = 10) -> str:
    """GET ``url`` (a /metrics page), retrying while it does not answer yet: the page as text."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text: str = response.read().decode("utf-8")
                return text
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def scrape(url: str, timeout: float = 10) -> Scrape:
    """GET ``url`` (a /metrics page), retrying while it does not answer yet, and parse it."""
    return parse(fetch(url, timeout))


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def require_binary(name: str) -> str:
    """The path of ``name`` (promtool, prometheus). Missing: the test is skipped, or fails when
    NAMESRV_REQUIRE_PROMETHEUS=1 (``make test`` sets it; scripts/install-prometheus.sh installs it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (run scripts/install-prometheus.sh)"
        if os.environ.get("NAMESRV_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path
