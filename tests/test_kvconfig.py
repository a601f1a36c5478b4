"""Unit tests of the persisted KV config (S21): RocketMQ's kvConfig.json, atomic writes, rollback."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.core.errors import KVConfigNotFoundError, PersistError
from namesrv_grpc.core.kvconfig import KVConfigFileError, KVConfigManager, load_config_table
from namesrv_grpc.runtime import atomic_file
from tests.support import fixture_path

NS = "ORDER_TOPIC_CONFIG"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "kvConfig.json"


def on_disk(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- put / get / delete / list


def test_s21_put_get_delete_list(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put(NS, "orders", "broker-a:4")
    kv.put(NS, "payments", "broker-b:8")
    kv.put("OTHER", "k", "v")
    assert kv.get(NS, "orders") == "broker-a:4"
    assert kv.get_or_none(NS, "nope") is None
    assert kv.list_namespace(NS) == {"orders": "broker-a:4", "payments": "broker-b:8"}
    assert kv.list_namespace("unknown") == {}

    kv.put(NS, "orders", "broker-a:2")
    assert kv.get(NS, "orders") == "broker-a:2"

    kv.delete(NS, "orders")
    with pytest.raises(KVConfigNotFoundError) as info:
        kv.get(NS, "orders")
    assert info.value.metadata == {"namespace": NS, "key": "orders"}
    assert kv.snapshot() == {NS: {"payments": "broker-b:8"}, "OTHER": {"k": "v"}}


def test_s21_delete_absent_is_fine(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.delete(NS, "nope")
    kv.put(NS, "a", "1")
    kv.delete(NS, "nope")
    kv.delete("OTHER", "a")
    assert kv.snapshot() == {NS: {"a": "1"}}


def test_s21_deleting_last_key_removes_namespace(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put(NS, "a", "1")
    kv.delete(NS, "a")
    assert kv.snapshot() == {}
    assert on_disk(path) == {"configTable": {}}


def test_s21_list_and_snapshot_are_copies(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put(NS, "a", "1")
    kv.list_namespace(NS)["a"] = "changed"
    kv.snapshot()[NS]["b"] = "added"
    assert kv.snapshot() == {NS: {"a": "1"}}


def test_s21_memory_only_manager(tmp_path: Path) -> None:
    kv = KVConfigManager(None)
    kv.put(NS, "a", "1")
    assert kv.get(NS, "a") == "1"
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- persistence


def test_s21_every_change_persisted_and_loaded_by_new_manager(path: Path) -> None:
    kv = KVConfigManager(path)
    assert not path.exists()
    kv.put(NS, "orders", "broker-a:4")
    assert on_disk(path) == {"configTable": {NS: {"orders": "broker-a:4"}}}
    kv.put("PROJECT_CONFIG", "tenant", "生产")
    assert on_disk(path) == {"configTable": {NS: {"orders": "broker-a:4"}, "PROJECT_CONFIG": {"tenant": "生产"}}}
    assert KVConfigManager(path).snapshot() == kv.snapshot()
    kv.delete(NS, "orders")
    assert on_disk(path) == {"configTable": {"PROJECT_CONFIG": {"tenant": "生产"}}}
    reloaded = KVConfigManager(path)
    assert reloaded.snapshot() == {"PROJECT_CONFIG": {"tenant": "生产"}}
    assert reloaded.get("PROJECT_CONFIG", "tenant") == "生产"


def test_s21_file_is_utf8_json_not_escaped(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("P", "k", "生产")
    assert "生产" in path.read_bytes().decode("utf-8")


def test_s21_reads_rocketmq_kvconfig_json(tmp_path: Path) -> None:
    source = fixture_path("kvConfig.json")
    path = tmp_path / "kvConfig.json"
    shutil.copyfile(source, path)
    kv = KVConfigManager(path)
    assert kv.list_namespace("ORDER_TOPIC_CONFIG") == {"orders-eu": "broker-a:4;broker-b:4"}
    assert kv.get("PROJECT_CONFIG", "tenant-unicode") == "生产"
    assert kv.snapshot() == {
        "ORDER_TOPIC_CONFIG": {"orders-eu": "broker-a:4;broker-b:4"},
        "PROJECT_CONFIG": {"tenant-a": "project-alpha", "tenant-unicode": "生产"},
    }
    # Loading does not rewrite the file.
    assert path.read_bytes() == source.read_bytes()
    # Writing keeps RocketMQ's shape, and the untouched entries.
    kv.put("ORDER_TOPIC_CONFIG", "orders-us", "broker-c:8")
    assert on_disk(path) == {
        "configTable": {
            "ORDER_TOPIC_CONFIG": {"orders-eu": "broker-a:4;broker-b:4", "orders-us": "broker-c:8"},
            "PROJECT_CONFIG": {"tenant-a": "project-alpha", "tenant-unicode": "生产"},
        }
    }


def test_s21_missing_or_empty_file_is_empty_table(tmp_path: Path) -> None:
    assert load_config_table(tmp_path / "absent.json") == {}
    empty = tmp_path / "empty.json"
    empty.write_text("  \n", encoding="utf-8")
    assert load_config_table(empty) == {}
    null_table = tmp_path / "null.json"
    null_table.write_text('{"configTable": null}', encoding="utf-8")
    assert load_config_table(null_table) == {}


def test_s21_bom_numbers_and_booleans(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"configTable": {"N": {"i": 4, "f": 1.5, "b": true, "s": "x"}, "E": {}}}')
    assert load_config_table(path) == {"N": {"i": "4", "f": "1.5", "b": "true", "s": "x"}}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-object"),
        pytest.param(b'{"configTable": []}', id="table-not-object"),
        pytest.param(b'{"configTable": {"NS": "v"}}', id="namespace-not-object"),
        pytest.param(b'{"configTable": {"NS": {"k": ["v"]}}}', id="value-list"),
        pytest.param(b'{"configTable": {"NS": {"k": {"x": 1}}}}', id="value-object"),
        pytest.param(b'{"configTable": {"NS": {"k": null}}}', id="value-null"),
        pytest.param(b'{"configTable": {"NS": {"k": "\xff\xfe"}}}', id="not-utf8"),
    ],
)
def test_s21_bad_file_raises_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad-kvConfig.json"
    path.write_bytes(content)
    with pytest.raises(KVConfigFileError) as info:
        KVConfigManager(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == content


def test_s21_directory_instead_of_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.mkdir()
    with pytest.raises(KVConfigFileError) as info:
        KVConfigManager(path)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------------------- atomic write, rollback


def _fail(*args: object, **kwargs: object) -> None:
    raise OSError(28, "No space left on device")


@pytest.fixture
def populated(path: Path) -> tuple[KVConfigManager, bytes]:
    kv = KVConfigManager(path)
    kv.put(NS, "orders", "broker-a:4")
    kv.put("PROJECT_CONFIG", "tenant", "生产")
    return kv, path.read_bytes()


def _dir_listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_s21_failed_put_of_new_key_rolls_back(
    monkeypatch: pytest.MonkeyPatch, path: Path, populated: tuple[KVConfigManager, bytes], failing: str
) -> None:
    kv, old_bytes = populated
    before = kv.snapshot()
    monkeypatch.setattr(f"namesrv_grpc.runtime.atomic_file.os.{failing}", _fail)
    with pytest.raises(PersistError) as info:
        kv.put("NEW_NS", "k", "v")
    monkeypatch.undo()
    assert info.value.reason == "KV_CONFIG_PERSIST_FAILED"
    assert str(path) in info.value.message
    assert path.read_bytes() == old_bytes
    assert _dir_listing(path) == ["kvConfig.json"]  # no temp file left behind
    assert kv.snapshot() == before
    assert kv.get_or_none("NEW_NS", "k") is None


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_s21_failed_put_of_existing_key_rolls_back(
    monkeypatch: pytest.MonkeyPatch, path: Path, populated: tuple[KVConfigManager, bytes], failing: str
) -> None:
    kv, old_bytes = populated
    monkeypatch.setattr(f"namesrv_grpc.runtime.atomic_file.os.{failing}", _fail)
    with pytest.raises(PersistError):
        kv.put(NS, "orders", "broker-z:1")
    with pytest.raises(PersistError):
        kv.put(NS, "another", "x")
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert _dir_listing(path) == ["kvConfig.json"]
    assert kv.get(NS, "orders") == "broker-a:4"
    assert kv.list_namespace(NS) == {"orders": "broker-a:4"}
    # Works again once the disk does.
    kv.put(NS, "orders", "broker-z:1")
    assert KVConfigManager(path).get(NS, "orders") == "broker-z:1"


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_s21_failed_delete_rolls_back(
    monkeypatch: pytest.MonkeyPatch, path: Path, populated: tuple[KVConfigManager, bytes], failing: str
) -> None:
    kv, old_bytes = populated
    before = kv.snapshot()
    monkeypatch.setattr(f"namesrv_grpc.runtime.atomic_file.os.{failing}", _fail)
    with pytest.raises(PersistError):
        kv.delete(NS, "orders")  # the namespace's last key
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert _dir_listing(path) == ["kvConfig.json"]
    assert kv.snapshot() == before
    assert kv.get(NS, "orders") == "broker-a:4"


def test_s21_failed_first_write_leaves_no_file(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    kv = KVConfigManager(path)
    monkeypatch.setattr("namesrv_grpc.runtime.atomic_file.os.replace", _fail)
    with pytest.raises(PersistError):
        kv.put(NS, "a", "1")
    monkeypatch.undo()
    assert not path.exists()
    assert list(path.parent.iterdir()) == []
    assert kv.snapshot() == {}


def test_s21_failed_directory_fsync_keeps_memory_and_disk_in_agreement(
    monkeypatch: pytest.MonkeyPatch, path: Path, populated: tuple[KVConfigManager, bytes]
) -> None:
    """Only the fsync of the directory (after the rename) fails. Whatever the manager then reports,
    what it holds in memory must be what a restarted NameServer loads from disk: a PersistError with
    the old file intact, or success with the new one."""
    kv, old_bytes = populated
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(22, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr("namesrv_grpc.runtime.atomic_file.os.fsync", fsync)
    try:
        kv.put(NS, "orders", "broker-z:1")
    except PersistError:
        failed = True
    else:
        failed = False
    monkeypatch.undo()
    assert _dir_listing(path) == ["kvConfig.json"]
    assert KVConfigManager(path).snapshot() == kv.snapshot()
    if failed:
        assert path.read_bytes() == old_bytes


def test_write_atomically_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "f.txt"
    atomic_file.write_atomically(path, "first, a longer text\n")
    atomic_file.write_atomically(path, "二\n")
    assert path.read_bytes() == "二\n".encode()
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.txt"]
