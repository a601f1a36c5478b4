"""pyarrow is the ``snapshots`` extra, not a dependency of ``pip install namesrv-grpc`` (nor of the
default container image): a NameServer without it runs, and every way of taking a snapshot says
which extra to install. pyarrow is hidden from the processes started here by a package of the same
name, earlier on PYTHONPATH, whose import fails as a missing module's does."""

from __future__ import annotations

from importlib.metadata import requires
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.errors import SNAPSHOTS_EXTRA
from tests.support import Stubs, error_info, register_request, run_cli, running_namesrv, topic

INSTALL_HINT = f"pip install 'namesrv-grpc[{SNAPSHOTS_EXTRA}]'"


@pytest.fixture
def without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes started by the test (tests.support passes PYTHONPATH on) cannot import pyarrow."""
    hidden = tmp_path / "without-pyarrow" / "pyarrow"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'pyarrow\' (hidden by tests)", name="pyarrow")\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("PYTHONPATH", str(hidden.parent))


def test_pyarrow_is_the_snapshots_extra() -> None:
    """As pip sees the installed package (its metadata, made from pyproject.toml by `make`)."""
    requirements = requires("namesrv-grpc") or []
    pyarrow = [r for r in requirements if r.startswith("pyarrow")]
    assert pyarrow, requirements
    assert all(r.endswith(f'extra == "{SNAPSHOTS_EXTRA}"') for r in pyarrow), pyarrow
    # The Spark jobs read snapshots: the analytics extra brings the snapshots one.
    assert f'namesrv-grpc[{SNAPSHOTS_EXTRA}]; extra == "analytics"' in requirements


@pytest.mark.usefixtures("without_pyarrow")
def test_a_namesrv_without_pyarrow_serves_and_says_which_extra_snapshots_need(tmp_path: Path) -> None:
    with running_namesrv(tmp_path / "ns", "--snapshot-dir", str(tmp_path / "snapshots")) as server:
        with server.channel() as channel:
            stubs = Stubs(channel)
            stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest")]), timeout=10)
            route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=10)
            assert route.route.broker_datas[0].broker_name == "broker-a"
            with pytest.raises(grpc.RpcError) as caught:
                stubs.admin.ExportRouteSnapshot(admin_pb2.ExportRouteSnapshotRequest(), timeout=30)
        assert caught.value.code() == grpc.StatusCode.INTERNAL
        info = error_info(caught.value)
        assert info.reason == "SNAPSHOT_WRITE_FAILED"
        assert dict(info.metadata) == {"extra": SNAPSHOTS_EXTRA}
        message = str(caught.value.details())
        assert message.startswith("route snapshots need pyarrow")
        assert INSTALL_HINT in message
        assert not (tmp_path / "snapshots").exists() or not any((tmp_path / "snapshots").iterdir())
        admin = run_cli("namesrv_grpc.admin.cli", "--namesrv", server.address, "snapshot")
        assert admin.returncode == 1
        assert INSTALL_HINT in admin.stdout + admin.stderr


@pytest.mark.usefixtures("without_pyarrow")
def test_namesrv_snapshot_without_pyarrow_says_which_extra_before_asking_anyone(tmp_path: Path) -> None:
    # Nothing listens on port 9: with pyarrow the command would fail on the connection instead.
    ran = run_cli("namesrv_grpc.admin.snapshot_cli", "--namesrv", "127.0.0.1:9", "--out", str(tmp_path / "out"))
    assert ran.returncode == 1
    assert ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith("namesrv-snapshot: route snapshots need pyarrow")
    assert INSTALL_HINT in line
    assert not (tmp_path / "out").exists()
