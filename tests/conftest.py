"""Fixtures: a NameServer process per test that needs one, with blocking stubs; one Spark session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import NamesrvProcess, Stubs, running_namesrv

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for every analytics test (starting one takes seconds): two cores,
    two shuffle partitions, no UI, UTC."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("namesrv-grpc-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
