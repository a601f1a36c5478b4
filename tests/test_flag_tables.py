"""The flag tables of the documentation against each command's ``--help`` (its argparse parser), so
they cannot drift apart again (issue 22: ``namesrv``'s table had lost ``--log-level``).

Every option of a parser must appear in its table (one of its spellings, ``-c`` or
``--config-file``), and every flag a table names must be an option of that parser.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_agent import cli as agent_cli
from namesrv_grpc import admin_cli, snapshot_cli
from namesrv_grpc import cli as namesrv_cli
from tests.support import ROOT

FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")


def subcommand(build: Callable[[], argparse.ArgumentParser], name: str) -> Callable[[], argparse.ArgumentParser]:
    def parser() -> argparse.ArgumentParser:
        for action in build()._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices[name]  # type: ignore[no-any-return]
        raise AssertionError(f"no sub-command {name}")

    return parser


TABLES = [
    # (command, its parser, the document, the line after which its flag table is the first table)
    ("namesrv", namesrv_cli.build_parser, "docs/configuration.md", "## `namesrv` (also `python -m namesrv_grpc`)"),
    (
        "broker-agent",
        agent_cli.build_parser,
        "docs/configuration.md",
        "## `broker-agent` (also `python -m broker_agent`)",
    ),
    ("namesrv-admin", admin_cli.build_parser, "docs/namesrv-admin.md", "## Options"),
    (
        "namesrv-admin compare",
        subcommand(admin_cli.build_parser, "compare"),
        "docs/namesrv-admin.md",
        "Options of `compare`:",
    ),
    ("namesrv-snapshot", snapshot_cli.build_parser, "docs/snapshots.md", "## Exporting snapshots"),
]


def table_flags(document: Path, marker: str) -> set[str]:
    """The flags in the first column of the first table after the line ``marker``."""
    lines = document.read_text().splitlines()
    assert marker in lines, f"{document}: no line {marker!r}"
    rows: list[str] = []
    for line in lines[lines.index(marker) + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    assert rows, f"{document}: no table after {marker!r}"
    flags: set[str] = set()
    for row in rows[2:]:  # header and separator first
        first = row.split("|")[1]
        flags.update(FLAG.findall(" ".join(re.findall(r"`([^`]*)`", first))))
    return flags


def parser_options(parser: argparse.ArgumentParser) -> list[list[str]]:
    return [
        list(action.option_strings) for action in parser._actions if action.option_strings and action.dest != "help"
    ]


@pytest.mark.parametrize(("command", "build", "document", "marker"), TABLES, ids=[t[0] for t in TABLES])
def test_flag_table_matches_help(
    command: str, build: Callable[[], argparse.ArgumentParser], document: str, marker: str
) -> None:
    documented = table_flags(ROOT / document, marker)
    options = parser_options(build())
    missing = [spellings for spellings in options if not documented & set(spellings)]
    assert not missing, f"{command}: --help has options that {document} does not list: {missing}"
    known = {flag for spellings in options for flag in spellings}
    unknown = sorted(documented - known)
    assert not unknown, f"{command}: {document} lists flags that --help does not have: {unknown}"


def test_the_check_sees_a_missing_flag(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text("## Options\n\n| flag | meaning |\n|---|---|\n| `-c FILE` | config |\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--config-file")
    parser.add_argument("--log-level")
    documented = table_flags(document, "## Options")
    assert documented == {"-c"}
    assert [s for s in parser_options(parser) if not documented & set(s)] == [["--log-level"]]
