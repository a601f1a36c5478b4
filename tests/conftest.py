"""Fixtures: a NameServer process per test that needs one, with blocking stubs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import NamesrvProcess, Stubs, running_namesrv


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[NamesrvProcess]:
    """A fresh NameServer process on 127.0.0.1 (expiry scan every 200 ms)."""
    with running_namesrv(tmp_path / "namesrv", "--scan-not-active-broker-interval", "200") as server:
        yield server


@pytest.fixture
def stubs(namesrv: NamesrvProcess) -> Iterator[Stubs]:
    """Blocking stubs of every service of the ``namesrv`` fixture."""
    with namesrv.channel() as channel:
        yield Stubs(channel)
