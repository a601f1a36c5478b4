"""JSON bodies as RocketMQ's Java side writes and reads them (fastjson 1.2.83, ``RemotingSerializable``).

Writing (:func:`dumps`), fastjson's default features (``QuoteFieldNames``, ``SkipTransientField``,
``WriteEnumUsingName``, ``SortField``):

- compact, no spaces; ``None`` values of a dict are left out (fastjson skips null fields and null
  map values); the caller gives dict keys in fastjson's order (bean properties alphabetical);
- **integer keys are written unquoted**: ``{"brokerAddrs":{0:"10.0.0.1:10911"}}`` -- not standard
  JSON, but what every RocketMQ client parses;
- strings: ``"``, ``\\``, control characters, U+007F..U+009F, U+2028 and U+2029 are escaped
  (``\\u`` and four upper-case hex digits), everything else is written as UTF-8 (a lone surrogate, which
  only a ``\\uD800`` escape in received JSON can produce, becomes ``?`` as in Java's UTF-8 encoder).

``standard=True`` is what ``ClientRequestProcessor`` writes for GET_ROUTEINFO_BY_TOPIC since 4.9.4
(``BrowserCompatible, QuoteFieldNames, SkipTransientField, MapSortField``): integer keys quoted, map keys
sorted, every non-ASCII character and ``/`` escaped, integers beyond +-(2**53 - 1) written as strings.

Reading (:func:`loads`) accepts standard JSON and fastjson's unquoted integer keys. Object keys always
come back as ``str`` (``{0:"a"}`` reads as ``{"0": "a"}``); callers convert. Nesting is bounded by the
interpreter's recursion limit (deeper input raises :class:`FastjsonDecodeError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["FastjsonDecodeError", "dumps", "loads"]

_JS_SAFE_INTEGER: Final = 2**53 - 1

# fastjson's default escaping (SerializeWriter.writeStringWithDoubleQuote without BrowserCompatible).
_DEFAULT_SPECIAL: Final = re.compile('[\x00-\x1f"\\\\\x7f-\x9f\u2028\u2029]')
# BrowserCompatible: also '/' and everything from U+007F up.
_BROWSER_SPECIAL: Final = re.compile('[\x00-\x1f"/\\\\\x7f-\U0010ffff]')
_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unicode_escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as Java strings hold it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _escape_default(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or _unicode_escape(char)


def _escape_browser(match: re.Match[str]) -> str:
    char = match.group()
    if char == "/":
        return "\\/"
    return _SHORT_ESCAPES.get(char) or _unicode_escape(char)


def _string(value: str, standard: bool) -> str:
    if standard:
        if _BROWSER_SPECIAL.search(value) is None:
            return f'"{value}"'
        return '"' + _BROWSER_SPECIAL.sub(_escape_browser, value) + '"'
    if _DEFAULT_SPECIAL.search(value) is None:
        return f'"{value}"'
    return '"' + _DEFAULT_SPECIAL.sub(_escape_default, value) + '"'


def _key(key: object, standard: bool) -> str:
    if isinstance(key, str):
        return _string(key, standard)
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError(f"fastjson map keys must be str or int, got {type(key).__name__}")
    return f'"{key}"' if standard else str(key)


def _write(value: Any, out: list[str], standard: bool) -> None:
    if isinstance(value, str):
        out.append(_string(value, standard))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if standard and not -_JS_SAFE_INTEGER <= value <= _JS_SAFE_INTEGER:
            out.append(f'"{value}"')
        else:
            out.append(str(value))
    elif isinstance(value, float):
        out.append(json.dumps(value))
    elif isinstance(value, Mapping):
        items = [(k, v) for k, v in value.items() if v is not None]
        if standard:
            items.sort(key=lambda item: (isinstance(item[0], str), item[0]))
        out.append("{")
        first = True
        for key, item in items:
            if not first:
                out.append(",")
            first = False
            out.append(_key(key, standard))
            out.append(":")
            _write(item, out, standard)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        if all(type(item) is str for item in value):
            out.append("[" + ",".join([_string(item, standard) for item in value]) + "]")
            return
        out.append("[")
        first = True
        for item in value:
            if not first:
                out.append(",")
            first = False
            _write(item, out, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as fastjson")


def dumps(obj: Any, *, standard: bool = False) -> bytes:
    """``obj`` (dicts, lists/tuples/sets, str, int, bool, None, float) as UTF-8 JSON the way fastjson
    writes it; ``standard=True`` for the BrowserCompatible form (see the module docstring).

    Raises TypeError for a value or map key it cannot write.
    """
    return dumps_text(obj, standard=standard).encode("utf-8", "replace")


def dumps_text(obj: Any, *, standard: bool = False) -> str:
    """:func:`dumps` before its UTF-8 encoding: texts of parts can be joined and encoded once (or
    encoded apart: lone surrogates become ``?`` alike). Raises TypeError as :func:`dumps` does."""
    out: list[str] = []
    _write(obj, out, standard)
    return "".join(out)


class FastjsonDecodeError(ValueError):
    """A body is not JSON (standard or fastjson-style), not UTF-8, or nested too deeply."""


# One match = everything up to the next integer key outside strings (or the end): runs of ordinary
# characters, '{' or ',' not starting an integer key, and whole strings (nothing inside a string is
# touched; an unterminated string runs to the end). Some alternative always applies at every
# position, so a match never fails and never backtracks: one linear pass inside the regex engine
# (no quadratic rescans on hostile input), one callback per integer key.
_UP_TO_INT_KEY: Final = re.compile(
    r'((?:[^"{,]+|[{,](?!\s*-?\d+\s*:)|"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z))*)(?:([{,]\s*)(-?\d+)(\s*:)|\Z)',
    re.DOTALL,
)
_MAYBE_INT_KEY: Final = re.compile(r"[{,]\s*-?\d+\s*:")


def _quote_key(match: re.Match[str]) -> str:
    before, opening, key, colon = match.groups()
    if opening is None:
        return str(before)
    return f'{before}{opening}"{key}"{colon}'


def _quote_integer_keys(text: str) -> str:
    """``text`` with every integer object key outside strings quoted (``{0:"a"}`` -> ``{"0":"a"}``)."""
    return _UP_TO_INT_KEY.sub(_quote_key, text)


def loads(data: bytes | str) -> Any:
    """Parse a JSON body written by fastjson or any standard JSON writer.

    Object keys come back as ``str`` (unquoted integer keys included). Raises FastjsonDecodeError
    (also for an integer of more than 4,300 digits, which Python refuses to convert).
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError as exc:
            raise FastjsonDecodeError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    else:
        text = data
    try:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if _MAYBE_INT_KEY.search(text) is None:
                raise FastjsonDecodeError(f"not JSON: {exc}") from None
            first_error = exc
        try:
            return json.loads(_quote_integer_keys(text))
        except json.JSONDecodeError:
            raise FastjsonDecodeError(f"not JSON: {first_error}") from None
    except RecursionError:
        raise FastjsonDecodeError("JSON nested too deeply") from None
    except ValueError as exc:  # a number of more than 4,300 digits (int_max_str_digits)
        raise FastjsonDecodeError(f"not JSON this server reads: {str(exc)[:120]}") from None
