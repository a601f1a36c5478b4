"""``--version`` of the commands (``namesrv``, ``broker-agent``, ``namesrv-admin``, ``namesrv-snapshot``).

The installed distribution's version is looked up only when ``--version`` is given: reading package
metadata costs ~60 ms, which every start of ``namesrv`` and every ``namesrv-admin`` call would pay.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def version() -> str:
    """The installed ``namesrv-grpc`` distribution's version (pyproject.toml ``version``), or
    ``"unknown"`` when the package runs from a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("namesrv-grpc")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the program's name and version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``PROG VERSION`` on standard output and exit 0."""
    parser.add_argument("--version", action=_VersionAction)
