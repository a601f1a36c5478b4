"""Closed output pipes (``namesrv-admin route T | head -1``, ``namesrv -p | head``): no traceback, ever.

Python ignores SIGPIPE, so writing to a pipe whose reader has gone raises BrokenPipeError, and the
interpreter's final flush of stdout prints another one. The Python documentation's recipe
("Note on SIGPIPE" in the ``signal`` module docs) is applied here: point stdout at /dev/null so
nothing more is written, and leave quietly.

- :func:`quiet_broken_pipe` wraps a command-line ``main``: a closed pipe ends it with exit code 141
  (128 + SIGPIPE, what a shell reports for ``yes | head`` under ``set -o pipefail``).
- :func:`print_line` is for long-running programs (the NameServer, the broker agent): a closed
  stdout silences further output but the program keeps running (logs go to stderr).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")

EXIT_BROKEN_PIPE = 141
"""Exit code after a closed output pipe: 128 + SIGPIPE (13), as a shell reports it."""


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no descriptor (replaced in tests)
        pass
    finally:
        os.close(devnull)


def quiet_broken_pipe(main: Callable[P, int]) -> Callable[P, int]:
    """Wrap a ``main`` returning an exit code: BrokenPipeError (while running or on the final flush
    of stdout) becomes exit code :data:`EXIT_BROKEN_PIPE` with nothing on stderr."""

    @functools.wraps(main)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        return code

    return wrapper


def print_line(text: str) -> None:
    """Print one line to stdout and flush; when the reader has closed the pipe, silence stdout for
    good instead of failing (for programs that keep running)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        _silence_stdout()
