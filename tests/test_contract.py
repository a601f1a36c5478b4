"""The contract's breaking-change check: ``buf breaking`` (run by ``make lint``) compares protos/ with
the committed image protos/contract.binpb; the image is replaced only with a CHANGELOG.md line."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from tests.support import ROOT

BUF = ["npx", "--yes", "@bufbuild/buf@1.75.0"]
IMAGE = ROOT / "protos" / "contract.binpb"


def test_the_image_in_use_has_a_changelog_line() -> None:
    digest = hashlib.sha256(IMAGE.read_bytes()).hexdigest()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"`{digest}`" in changelog, (
        f"protos/contract.binpb (sha256 {digest}) was replaced without a CHANGELOG.md line"
    )


def test_the_image_holds_the_rocketmq_5_fields() -> None:
    """A buf image is a FileDescriptorSet on the wire; it was taken with zone mode and static topics."""
    image = descriptor_pb2.FileDescriptorSet.FromString(IMAGE.read_bytes())
    messages = {
        f"{file.package}.{message.name}": {field.name: field.number for field in message.field}
        for file in image.file
        for message in file.message_type
    }
    assert messages["namesrv.v1.PickupTopicRouteRequest"]["zone_name"] == 2
    assert messages["namesrv.v1.WatchTopicRoutesRequest"]["zone_name"] == 2
    assert messages["namesrv.v1.TopicRouteData"]["topic_queue_mapping_by_broker"] == 5
    assert messages["namesrv.v1.RegisterBrokerBody"]["topic_queue_mapping_info_map"] == 4


def breaking(protos: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BUF, "breaking", str(protos), "--against", str(IMAGE)], capture_output=True, text=True, timeout=300
    )


def test_buf_breaking_passes_as_is_and_fails_on_a_renumbered_or_retyped_field(tmp_path: Path) -> None:
    if shutil.which("npx") is None:
        pytest.fail("npx (Node.js) is missing: make lint needs it for buf")
    protos = tmp_path / "protos"
    shutil.copytree(ROOT / "protos", protos, ignore=shutil.ignore_patterns("*.binpb"))
    same = breaking(protos)
    assert same.returncode == 0, same.stdout + same.stderr
    service = protos / "namesrv" / "v1" / "name_server_service.proto"
    original = service.read_text(encoding="utf-8")
    # An added field is fine.
    service.write_text(
        original.replace("  string topic = 1;\n", "  string topic = 1;\n  string extra_for_test = 99;\n", 1),
        encoding="utf-8",
    )
    assert breaking(protos).returncode == 0
    # Renumbered: RegisterBrokerRequest.broker_id 3 -> 13.
    renumbered = original.replace(
        "  int32 broker_id = 3;\n  // Address clients use", "  int32 broker_id = 13;\n  // Address clients use", 1
    )
    assert renumbered != original
    service.write_text(renumbered, encoding="utf-8")
    failed = breaking(protos)
    assert failed.returncode != 0
    assert re.search(r'"3" with name "broker_id" on message "RegisterBrokerRequest" was deleted', failed.stdout), (
        failed.stdout
    )
    # Retyped: RegisterBrokerRequest.broker_id int32 -> int64.
    service.write_text(
        original.replace(
            "  int32 broker_id = 3;\n  // Address clients use", "  int64 broker_id = 3;\n  // Address clients use", 1
        ),
        encoding="utf-8",
    )
    failed = breaking(protos)
    assert failed.returncode != 0
    assert 'changed type from "int32" to "int64"' in failed.stdout, failed.stdout
