"""The procedures of docs/operations.md, run as written against real NameServer processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support import Stubs, register_request, run_cli_in_process, running_namesrv, topic

ADMIN = "namesrv_grpc.admin.cli"


def admin(*args: str) -> str:
    """namesrv-admin ARGS, run in this process (tests/support.py ``run_cli_in_process``)."""
    result = run_cli_in_process(ADMIN, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_kv_config_backup_taken_while_running_restores_on_another_namesrv(tmp_path: Path) -> None:
    """Back up and restore kvConfig.json: a copy taken while the NameServer runs is a whole file,
    and a NameServer started on it (and a second one restored by replaying kv-put) holds the values;
    compare says both agree."""
    backup = tmp_path / "kvConfig.json.backup"
    with running_namesrv(tmp_path / "first") as first:
        admin("-n", first.address, "kv-put", "ORDER_TOPIC_CONFIG", "Orders", "broker-a:8")
        admin("-n", first.address, "kv-put", "ORDER_TOPIC_CONFIG", "Payments", "broker-a:4;broker-b:4")
        shutil.copy(first.workdir / "kvConfig.json", backup)  # while it runs
    restored_dir = tmp_path / "restored"
    restored_dir.mkdir()
    shutil.copy(backup, restored_dir / "kvConfig.json")
    with running_namesrv(restored_dir) as restored, running_namesrv(tmp_path / "replayed") as replayed:
        listed = json.loads(admin("-n", restored.address, "kv-list", "ORDER_TOPIC_CONFIG"))
        assert listed["table"] == {"Orders": "broker-a:8", "Payments": "broker-a:4;broker-b:4"}
        both = f"{restored.address};{replayed.address}"
        for server in (restored, replayed):  # a broker, so that compare has routes to compare
            with server.channel() as channel:
                Stubs(channel).ns.RegisterBroker(register_request(topics=[topic("Orders")]), timeout=5)
        for key, value in listed["table"].items():  # replayed: kv-put goes to every NameServer named
            admin("-n", both, "kv-put", "ORDER_TOPIC_CONFIG", key, value)
        assert admin("-n", both, "compare").splitlines()[0].startswith("all agree: 2 NameServers")
