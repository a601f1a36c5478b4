"""The flag tables of the documentation against each command's ``--help`` (its argparse parser), so
they cannot drift apart again (issue 22: ``namesrv``'s table had lost ``--log-level``).

Every option of a parser must appear in its table (one of its spellings, ``-c`` or
``--config-file``), and every flag a table names must be an option of that parser. For ``namesrv``
the defaults agree too (issue 28: ``--help`` said 10000 ms where ``-p`` and the docs said 5000):
every flag's help names its key and default, which must be what ``namesrv -p`` prints, and so must
every default the table gives as a value.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_agent import cli as agent_cli
from namesrv_grpc import cli as namesrv_cli
from namesrv_grpc.admin import cli as admin_cli
from namesrv_grpc.admin import snapshot_cli
from tests.support import ROOT, run_cli

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


# ------------------------------------------------------------------ defaults: --help, -p and the docs


HELP_DEFAULT = re.compile(r"\((?P<key>[\w.]+), default (?P<value>[^;:)]+)")
"""How a ``namesrv`` flag's help names its key and default: ``(scanNotActiveBrokerInterval, default 5000)``."""


@pytest.fixture(scope="module")
def effective_defaults() -> dict[str, str]:
    """What ``namesrv -p`` prints with no file and no flags, home directory as ``~``, empty as ``none``
    (how --help and the docs write them)."""
    printed = run_cli("namesrv_grpc", "-p")
    assert printed.returncode == 0, printed.stderr
    home = str(Path.home())
    shown = {}
    for line in printed.stdout.splitlines():
        key, _, value = line.partition("=")
        if value == home or value.startswith(home + "/"):
            value = "~" + value[len(home) :]
        shown[key] = value or "none"
    return shown


def test_namesrv_help_defaults_are_the_effective_defaults(effective_defaults: dict[str, str]) -> None:
    """Issue 28: --help said the scan interval defaults to 10000 while -p printed 5000."""
    actions = {action.dest: action for action in namesrv_cli.build_parser()._actions}
    for dest, key in namesrv_cli.FLAG_KEYS.items():
        help_text = actions[dest].help or ""
        match = HELP_DEFAULT.search(help_text)
        assert match, f"--{dest.replace('_', '-')}: its help names no '({key}, default ...)': {help_text!r}"
        assert match["key"] == key, help_text
        assert match["value"] == effective_defaults[key], (dest, help_text, effective_defaults[key])
    log_level = actions["log_level"]
    assert f"(default {log_level.default})" in (log_level.help or "")


def namesrv_table_rows() -> list[list[str]]:
    """The cells of each row of ``namesrv``'s table in docs/configuration.md."""
    lines = (ROOT / "docs" / "configuration.md").read_text().splitlines()
    start = lines.index("## `namesrv` (also `python -m namesrv_grpc`)")
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


DOCUMENTED_DEFAULT = re.compile(r"(?P<values>`[^`]*`(?:, `[^`]*`)*)(?: \(.*\))?")
"""A default cell holding values only (``5000`` (ms), ``65536``, ``32768`` (bytes)); other cells (a
link, ``off``, ``host:port``) are prose and not compared."""


def test_namesrv_docs_defaults_are_the_effective_defaults(effective_defaults: dict[str, str]) -> None:
    compared = 0
    for flag_cell, key_cell, default_cell, _ in namesrv_table_rows():
        keys = re.findall(r"`([^`]*)`", key_cell)
        match = DOCUMENTED_DEFAULT.fullmatch(default_cell)
        if match is None:
            continue
        values = re.findall(r"`([^`]*)`", match["values"])
        if not keys:  # a flag without a key: its argparse default
            flags = re.findall(r"`(--?[\w-]+)", flag_cell)
            defaults = {a.default for a in namesrv_cli.build_parser()._actions if set(a.option_strings) & set(flags)}
            assert defaults == set(values), (flag_cell, default_cell)
            compared += 1
            continue
        if len(values) == 1:
            values = values * len(keys)
        assert len(values) == len(keys), f"{key_cell}: {len(keys)} keys, {len(values)} defaults"
        for key, value in zip(keys, values, strict=True):
            assert effective_defaults[key] == value, (
                f"docs/configuration.md: {key} defaults to {value}, -p says {effective_defaults[key]}"
            )
            compared += 1
    assert compared >= 25  # the check reads the table (a changed layout must not make it compare nothing)
