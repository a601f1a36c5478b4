"""Fixtures: a NameServer process per test that needs one, with blocking stubs; one Spark session.

Hypothesis profiles: with ``CI`` set (any non-empty value) every property test runs the same examples
on every run (``derandomize``, no example database), so a CI failure is reproduced by rerunning; a
local run draws a fresh seed, prints it in the report header, and a failing test's report names it
(``pytest --hypothesis-seed=N`` replays the run). ``HYPOTHESIS_PROFILE`` picks a profile by name.
"""

from __future__ import annotations

import os
import random
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

# Before anything imports grpc: no gRPC fork handlers in the test process. PySpark starts its JVM
# with Popen(preexec_fn=...), a fork that runs Python before exec; with grpcio's fork support on (its
# default), a fork while another thread is inside gRPC ("Other threads are currently calling into
# gRPC, skipping fork() handlers") left the child's poller broken and the JVM never started
# (JAVA_GATEWAY_EXITED for every Spark test of an xdist worker that had run gRPC tests first).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tests.support import (
    SHORT_JVM_OPTIONS,
    SPARK_TEST_CONF,
    NamesrvProcess,
    SharedNamesrv,
    Stubs,
    running_namesrv,
    shared_namesrv,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


CI_PROFILE = "namesrv-ci"
DEV_PROFILE = "namesrv-dev"
settings.register_profile(CI_PROFILE, derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile(DEV_PROFILE, print_blob=True)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (CI_PROFILE if os.environ.get("CI") else DEV_PROFILE)
settings.load_profile(PROFILE)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Outside CI, pick the run's Hypothesis seed here (before Hypothesis' own plugin reads the
    option), so that it can be printed and replayed."""
    if not settings().derandomize and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def _seed_line(config: pytest.Config) -> str:
    if settings().derandomize:
        return f"hypothesis profile {PROFILE}: derandomized, the same examples on every run"
    return f"hypothesis profile {PROFILE}: seed {config.getoption('hypothesis_seed')} (replay: --hypothesis-seed=N)"


def pytest_report_header(config: pytest.Config) -> str:
    return _seed_line(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing property test's report ends with the Hypothesis seed that replays the run."""
    report = yield
    if report.failed and call.when == "call" and "reproduce_failure" in report.longreprtext:
        report.sections.append(("hypothesis seed", _seed_line(item.config)))
    return report


SHARED_SCOPES = frozenset({"module", "class", "package"})
SHARED_NAMESRV = "shared_namesrv"
"""The mark of a module whose tests share one emptied NameServer as ``namesrv``."""


def xdist_group_of(item: pytest.Item) -> str | None:
    """The pytest-xdist group that keeps ``item`` on the worker of the tests it shares a set-up with
    (``make test`` runs ``--dist loadgroup``): ``"spark"`` for every test that runs Spark (the one
    Spark session of the ``spark`` fixture, or a job of its own: two Spark JVMs at once starve a
    2-core machine); the test's file for a test that uses a module-, class- or package-scoped fixture
    (a server or JVM started once for the file); None for a test that sets up all it needs itself
    (spread one by one)."""
    info = getattr(item, "_fixtureinfo", None)
    if item.get_closest_marker(SHARED_NAMESRV) is not None:
        return item.nodeid.split("::", 1)[0]
    if item.get_closest_marker("spark") is not None or (info is not None and "spark" in info.names_closure):
        return "spark"
    if info is None:
        return None
    for definitions in info.name2fixturedefs.values():
        if any(definition.scope in SHARED_SCOPES for definition in definitions):
            return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that shares a set-up with others with ``xdist_group`` (:func:`xdist_group_of`),
    unless it names its group itself; first, before xdist's worker reads the marks. (Sending the long
    tests first was tried and measured worse: every JVM started at once, docs/development.md.)"""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := xdist_group_of(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def namesrv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NamesrvProcess]:
    """A fresh NameServer process on 127.0.0.1 (expiry scan every 200 ms). In a module marked
    ``pytestmark = pytest.mark.shared_namesrv`` (its tests need nothing of a process of their own:
    its exit, its log, its counters): the module's one NameServer, emptied first (``emptied_namesrv``)."""
    if request.node.get_closest_marker(SHARED_NAMESRV) is not None:
        yield request.getfixturevalue("emptied_namesrv")
        return
    with running_namesrv(tmp_path / "namesrv", "--scan-not-active-broker-interval", "200") as server:
        yield server


@pytest.fixture(scope="module")
def module_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedNamesrv]:
    """One NameServer (expiry scan every 200 ms) for a module's tests, and the function that empties
    it (:func:`tests.support.shared_namesrv`)."""
    with shared_namesrv(tmp_path_factory.mktemp("namesrv"), "--scan-not-active-broker-interval", "200") as found:
        yield found


@pytest.fixture(scope="module")
def module_namesrv_pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SharedNamesrv, SharedNamesrv]]:
    """Two NameServers (default options) for a module's tests, each with the function that empties
    it (:func:`tests.support.shared_namesrv`): for the tests of commands that talk to several."""
    root = tmp_path_factory.mktemp("pair")
    with shared_namesrv(root / "ns1") as one, shared_namesrv(root / "ns2") as two:
        yield one, two


@pytest.fixture
def emptied_namesrv(module_namesrv: SharedNamesrv) -> NamesrvProcess:
    """The module's NameServer, emptied through its public API (:func:`tests.support.empty_namesrv`):
    what a fresh one holds, without a start-up per test (~1.5 s of CPU each). A module whose tests
    need nothing of a process of their own (its exit, its log, its counters) gets it as ``namesrv``
    by marking itself ``pytest.mark.shared_namesrv``."""
    module_namesrv[1]()
    return module_namesrv[0]


@pytest.fixture
def stubs(namesrv: NamesrvProcess) -> Iterator[Stubs]:
    """Blocking stubs of every service of the ``namesrv`` fixture."""
    with namesrv.channel() as channel:
        yield Stubs(channel)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for every analytics test (starting one takes seconds): two cores,
    two shuffle partitions, no UI, UTC, a quick-starting JVM (:data:`SHORT_JVM_OPTIONS`), no code
    generation (:data:`SPARK_TEST_CONF`)."""
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
        .config("spark.driver.extraJavaOptions", SHORT_JVM_OPTIONS)
        .config(map={**SPARK_TEST_CONF})
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
