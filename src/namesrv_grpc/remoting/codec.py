"""Frames and headers of RocketMQ's remoting protocol (``RemotingCommand.java``, ``RocketMQSerializable.java``,
``NettyDecoder.java`` / ``NettyEncoder.java`` of ``apache/rocketmq`` 5.x).

A frame, all integers big-endian::

    int32  total length (everything after these 4 bytes)
    int32  (serialize type << 24) | header length       serialize type 0 = JSON, 1 = ROCKETMQ
    header (header length bytes)
    body   (the rest; may be empty)

JSON header (what fastjson writes for ``RemotingCommand``; key order is fastjson's, alphabetical)::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"remark":"...",
     "serializeTypeCurrentRPC":"JSON","version":401}

``remark`` and ``extFields`` are left out when null/empty, as fastjson leaves out nulls.

ROCKETMQ header (``RocketMQSerializable``)::

    int16 code, int8 language (LanguageCode), int16 version, int32 opaque, int32 flag,
    int32 remark length + UTF-8 remark, int32 extFields length + (int16 key length + key, int32 value length + value)*

What we accept beyond the Java encoder's output (clients differ, REMOTING.md): a JSON header with
trailing white space (the C++ client appends ``"\\n"`` and counts it), no ``remark``, no ``extFields``,
``language`` as a name (``"JAVA"``, ``"CPP"``) or a number, extField values that are JSON numbers or
booleans (fastjson turns them into strings, so do we: ``true`` -> ``"true"``), null extField values
(dropped, as Java treats them as absent). A zero-length ROCKETMQ string is read as ``None`` for the
remark (as Java does) and as ``""`` for an extField key or value (Java reads ``null``, which header
decoding treats as absent; an empty string is what a client meant).

Answers use the serialize type of the request (:meth:`RemotingCommand.make_response`), as RocketMQ
4.9.4-4.9.8 do; clients decode by the frame's type bits, so this suits every client.

Strings are written as UTF-8; a lone surrogate (only a ``\\uD800`` escape in a received JSON header
can produce one) becomes ``?``, as Java's UTF-8 encoder writes it.

Errors: anything a frame cannot be parsed from raises :class:`FrameError`; the server then closes the
connection, as RocketMQ's ``NettyDecoder`` does.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

import msgspec
import orjson

from namesrv_grpc.remoting.codes import (
    CURRENT_VERSION,
    DEFAULT_FRAME_MAX_LENGTH,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LANGUAGE_CODES,
    LANGUAGE_NAMES,
    SerializeType,
)

__all__ = [
    "DEFAULT_LANGUAGE",
    "FrameDecoder",
    "FrameError",
    "RemotingCommand",
    "decode_command",
    "encode_command",
    "encode_header",
]

DEFAULT_LANGUAGE: Final = "PYTHON"
"""``LanguageCode`` this implementation puts in what it sends (every client's LanguageCode list has it)."""

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_MAX_HEADER_LENGTH: Final = 0xFFFFFF
"""The header length is the low 24 bits of the second int32."""

_FIXED: Final = struct.Struct(">hbhii")
"""code, language, version, opaque, flag of a ROCKETMQ header."""
_FIXED_SIZE: Final = _FIXED.size  # 13
_INT32: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")
_FRAME_PREFIX: Final = struct.Struct(">ii")
_SERIALIZE_TYPE_NAMES: Final = {SerializeType.JSON: "JSON", SerializeType.ROCKETMQ: "ROCKETMQ"}
_JSON_SEPARATORS: Final = (",", ":")
_json_text: Final = json.JSONEncoder(ensure_ascii=False, separators=_JSON_SEPARATORS).encode


class FrameError(ValueError):
    """A frame that cannot be parsed: over the length limit, inconsistent lengths, an unknown
    serialize type, or a header that is neither valid JSON nor valid ROCKETMQ serialization.
    ``reason`` is the one-line explanation (also ``str(error)``)."""

    def __init__(self, reason: str, limit: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.limit = limit
        """The configuration key of the bound the frame is over (``remotingFrameMaxLength``,
        ``remotingHeaderMaxFields``), None for a malformed frame."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response (RocketMQ ``RemotingCommand``).

    ``code`` is a :class:`~.codes.RequestCode` in a request, a :class:`~.codes.ResponseCode` in a
    response. ``opaque`` pairs a response with its request. ``flag`` bit 0 marks a response, bit 1 a
    oneway request. ``ext_fields`` carries the request/response header fields (RocketMQ's
    ``CommandCustomHeader``) as strings. ``language`` is a ``LanguageCode`` name; ``version`` the
    sender's ``MQVersion`` ordinal; ``serialize_type`` the header serialization (0 JSON, 1 ROCKETMQ).
    """

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = DEFAULT_LANGUAGE
    version: int = CURRENT_VERSION
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True when the response bit (``RPC_TYPE``, bit 0) of ``flag`` is set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when the oneway bit (``RPC_ONEWAY``, bit 1) of ``flag`` is set: no answer is expected."""
        return bool(self.flag & FLAG_ONEWAY)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        body: bytes = b"",
        ext_fields: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """The answer to this request: same ``opaque`` and serialize type, the response flag set."""
        return RemotingCommand(
            code,
            self.opaque,
            FLAG_RESPONSE,
            remark,
            ext_fields if ext_fields is not None else {},
            body,
            DEFAULT_LANGUAGE,
            CURRENT_VERSION,
            self.serialize_type,
        )


# ----------------------------------------------------------------------------------------- encode


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    # Formatted directly (this runs for every response); the same bytes as json.dumps of the
    # fastjson-ordered dict, pieces that need escaping go through the JSON encoder.
    ext = f',"extFields":{_json_text(cmd.ext_fields)}' if cmd.ext_fields else ""
    remark = f',"remark":{_json_text(cmd.remark)}' if cmd.remark is not None else ""
    language = cmd.language
    quoted_language = f'"{language}"' if language in LANGUAGE_CODES else _json_text(language)
    return (
        f'{{"code":{int(cmd.code)}{ext},"flag":{int(cmd.flag)},"language":{quoted_language},'
        f'"opaque":{int(cmd.opaque)}{remark},"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}}}'
    ).encode("utf-8", "replace")


def _encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    if not (_INT16_MIN <= cmd.code <= _INT16_MAX and _INT16_MIN <= cmd.version <= _INT16_MAX):
        raise ValueError(f"code {cmd.code} and version {cmd.version} must fit in int16 in a ROCKETMQ header")
    parts = [
        _FIXED.pack(
            cmd.code, LANGUAGE_CODES.get(cmd.language, LANGUAGE_CODES["OTHER"]), cmd.version, cmd.opaque, cmd.flag
        )
    ]
    if cmd.remark:
        remark = cmd.remark.encode("utf-8", "replace")
        parts += (_INT32.pack(len(remark)), remark)
    else:
        parts.append(_INT32.pack(0))
    ext: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        raw_key, raw_value = key.encode("utf-8", "replace"), value.encode("utf-8", "replace")
        if len(raw_key) > _INT16_MAX:
            raise ValueError(f"extFields key of {len(raw_key)} bytes does not fit an int16 length")
        ext += (_INT16.pack(len(raw_key)), raw_key, _INT32.pack(len(raw_value)), raw_value)
    ext_bytes = b"".join(ext)
    parts += (_INT32.pack(len(ext_bytes)), ext_bytes)
    return b"".join(parts)


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header of ``cmd`` in its ``serialize_type`` (JSON as fastjson writes it, or ROCKETMQ).

    Raises ValueError for an unknown serialize type or a value that does not fit its field.
    """
    if cmd.serialize_type == SerializeType.JSON:
        return _encode_json_header(cmd)
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        try:
            return _encode_rocketmq_header(cmd)
        except struct.error as exc:  # opaque/flag outside int32
            raise ValueError(f"a field does not fit the ROCKETMQ header: {exc}") from None
    raise ValueError(f"unknown serialize type {cmd.serialize_type}")


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd``, starting with the 4-byte total length (``NettyEncoder``).

    Raises ValueError when the header is longer than 16 MiB - 1 (24 bits) or see :func:`encode_header`.
    """
    header = encode_header(cmd)
    if len(header) > _MAX_HEADER_LENGTH:
        raise ValueError(f"header of {len(header)} bytes does not fit the 24-bit header length")
    prefix = _FRAME_PREFIX.pack(4 + len(header) + len(cmd.body), (cmd.serialize_type << 24) | len(header))
    return prefix + header + cmd.body


# ----------------------------------------------------------------------------------------- decode


def _int_field(header: dict[str, Any], name: str, default: int) -> int:
    value = header.get(name, default)
    if value is None:
        return default
    if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        raise FrameError(f"JSON header field {name!r} must be an int32, got {value!r:.60}")
    return value


def _ext_value(key: str, value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise FrameError(f"JSON header extFields[{key!r:.60}] must be a string, got {type(value).__name__}")


MAX_HEADER_LENGTH: Final = 1024 * 1024
"""Longest header by default (``remotingHeaderMaxLength``, 1 MiB): a RocketMQ request header is a few
hundred bytes (a REGISTER_BROKER's about 400); the longest a NameServer takes is PUT_KV_CONFIG's,
whose value travels in the header (``kvConfigMaxValueSize``, 64 KiB, up to six bytes a character once
JSON-escaped). Far below a frame's 16 MiB: a longer header is refused as soon as its length arrives,
so a peer cannot make the server hold or parse megabytes of header."""

MAX_HEADER_FIELDS: Final = 1024
"""Most extFields one header may carry (``remotingHeaderMaxFields``'s default). RocketMQ's largest
request header class has about 30 fields; the bound keeps the work of decoding one header small
whatever its length (a 16 MiB JSON header ``[[],[],...]`` would otherwise take seconds of CPU)."""


def _check_json_structure(raw: bytes, max_fields: int) -> None:
    """Refuse, before parsing, a JSON header with more structure than ``max_fields`` extFields need:
    every comma, ``[`` and ``{`` is counted (strings included, so the count is an upper bound; plain
    long strings cost nothing to parse and are not limited here)."""
    tokens = raw.count(b",") + raw.count(b"{") + raw.count(b"[")
    if tokens > max_fields + 16:
        raise FrameError(
            f"JSON header of {len(raw)} bytes has {tokens} commas and brackets, more than {max_fields} "
            "extFields need (remotingHeaderMaxFields)",
            "remotingHeaderMaxFields",
        )


_Int32 = Annotated[int, msgspec.Meta(ge=_INT32_MIN, le=_INT32_MAX)]


class _JsonHeader(msgspec.Struct):
    """A JSON header as every RocketMQ client writes it: the fast path (msgspec checks the types and
    ranges in C; unknown fields such as ``serializeTypeCurrentRPC`` are ignored)."""

    code: _Int32
    language: str
    opaque: _Int32 = 0
    flag: _Int32 = 0
    version: _Int32 = 0
    remark: str | None = None
    extFields: dict[str, str] | None = None


_HEADER_DECODER = msgspec.json.Decoder(_JsonHeader)


def _decode_json_header(raw: bytes, max_fields: int = MAX_HEADER_FIELDS) -> RemotingCommand:
    _check_json_structure(raw, max_fields)
    try:
        fast = _HEADER_DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass  # defaults, lenient conversions and errors naming the field, below
    else:
        ext = fast.extFields
        return RemotingCommand(
            fast.code,
            fast.opaque,
            fast.flag,
            fast.remark,
            ext if ext is not None else {},
            b"",
            fast.language,
            fast.version,
            SerializeType.JSON,
        )
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson refuses a few things the json module takes (integers beyond 64 bits, NaN): decide
        # with the json module, as before, so what was accepted stays accepted and errors read alike.
        try:
            header = json.loads(raw)
        except RecursionError:
            raise FrameError("JSON header is nested too deeply") from None
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise FrameError(f"header is not valid JSON: {exc}") from None
    return _decode_json_header_slowly(header)


def _decode_json_header_slowly(header: Any) -> RemotingCommand:
    """Defaults, lenient conversions and errors naming the field."""
    if not isinstance(header, dict):
        raise FrameError(f"JSON header must be an object, got {type(header).__name__}")
    if "code" not in header:
        raise FrameError("JSON header has no 'code'")
    code = _int_field(header, "code", 0)
    language = header.get("language")
    if language is None:
        language = "JAVA"  # RemotingCommand's default
    elif type(language) is int:
        language = LANGUAGE_NAMES.get(language, "OTHER")
    elif not isinstance(language, str):
        raise FrameError(f"JSON header field 'language' must be a LanguageCode name or number, got {language!r:.60}")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError(f"JSON header field 'remark' must be a string, got {type(remark).__name__}")
    raw_ext = header.get("extFields")
    ext_fields: dict[str, str] = {}
    if raw_ext is not None:
        if not isinstance(raw_ext, dict):
            raise FrameError(f"JSON header field 'extFields' must be an object, got {type(raw_ext).__name__}")
        for key, value in raw_ext.items():
            text = _ext_value(key, value)
            if text is not None:
                ext_fields[key] = text
    return RemotingCommand(
        code,
        _int_field(header, "opaque", 0),
        _int_field(header, "flag", 0),
        remark,
        ext_fields,
        b"",
        language,
        _int_field(header, "version", 0),
        SerializeType.JSON,
    )


def _read_str(raw: bytes, position: int, length: int, end: int, what: str) -> tuple[str, int]:
    if length < 0 or position + length > end:
        raise FrameError(f"ROCKETMQ header {what} length {length} runs past the header ({end - position} bytes left)")
    try:
        return raw[position : position + length].decode(), position + length
    except UnicodeDecodeError as exc:
        raise FrameError(f"ROCKETMQ header {what} is not UTF-8: {exc.reason} at byte {exc.start}") from None


def _decode_rocketmq_header(raw: bytes, max_fields: int = MAX_HEADER_FIELDS) -> RemotingCommand:
    end = len(raw)
    if end < _FIXED_SIZE + 8:
        raise FrameError(f"ROCKETMQ header of {end} bytes is shorter than the {_FIXED_SIZE + 8}-byte minimum")
    code, language, version, opaque, flag = _FIXED.unpack_from(raw, 0)
    position = _FIXED_SIZE
    (remark_length,) = _INT32.unpack_from(raw, position)
    position += 4
    remark: str | None = None
    if remark_length != 0:
        remark, position = _read_str(raw, position, remark_length, end, "remark")
    if position + 4 > end:
        raise FrameError("ROCKETMQ header ends before the extFields length")
    (ext_length,) = _INT32.unpack_from(raw, position)
    position += 4
    if ext_length < 0 or position + ext_length > end:
        raise FrameError(
            f"ROCKETMQ header extFields length {ext_length} does not fit the header ({end - position} bytes left)"
        )
    ext_end = position + ext_length
    ext_fields: dict[str, str] = {}
    while position < ext_end:
        if position + 2 > ext_end:
            raise FrameError("ROCKETMQ header extFields entry is cut inside a key length")
        (key_length,) = _INT16.unpack_from(raw, position)
        key, position = _read_str(raw, position + 2, key_length, ext_end, "extFields key")
        if position + 4 > ext_end:
            raise FrameError(f"ROCKETMQ header extFields[{key!r:.60}] is cut inside its value length")
        (value_length,) = _INT32.unpack_from(raw, position)
        value, position = _read_str(raw, position + 4, value_length, ext_end, f"extFields[{key!r:.60}] value")
        ext_fields[key] = value
        if len(ext_fields) > max_fields:
            raise FrameError(
                f"ROCKETMQ header has more than {max_fields} extFields (remotingHeaderMaxFields)",
                "remotingHeaderMaxFields",
            )
    if position != end:
        raise FrameError(f"ROCKETMQ header has {end - position} bytes after its extFields")
    return RemotingCommand(
        code,
        opaque,
        flag,
        remark,
        ext_fields,
        b"",
        LANGUAGE_NAMES.get(language, "OTHER"),
        version,
        SerializeType.ROCKETMQ,
    )


def _http_or_tls_hint(prefix: bytes) -> str:
    if prefix[:1] == b"\x16" and prefix[1:2] == b"\x03":
        return " (a TLS ClientHello? this port speaks plain RocketMQ remoting)"
    if prefix in (b"GET ", b"POST", b"PUT ", b"HEAD", b"PRI ", b"DELE", b"OPTI", b"PATC", b"CONN"):
        return " (an HTTP request? this port speaks RocketMQ remoting)"
    return ""


def _decode_frame(
    frame: bytes | bytearray, start: int, end: int, max_fields: int = MAX_HEADER_FIELDS
) -> RemotingCommand:
    """Decode the frame in ``frame[start:end]`` (after its 4-byte total length)."""
    if end - start < 4:
        raise FrameError(f"frame of {end - start} bytes has no header length")
    (marked,) = _INT32.unpack_from(frame, start)
    serialize_type = (marked >> 24) & 0xFF
    header_length = marked & _MAX_HEADER_LENGTH
    header_start = start + 4
    body_start = header_start + header_length
    if body_start > end:
        raise FrameError(
            f"header length {header_length} is larger than the frame ({end - header_start} bytes after it)"
        )
    with memoryview(frame) as view:
        header = view[header_start:body_start].tobytes()
    if serialize_type == SerializeType.JSON:
        cmd = _decode_json_header(header, max_fields)
        if len(cmd.ext_fields) > max_fields:
            raise FrameError(
                f"JSON header has more than {max_fields} extFields (remotingHeaderMaxFields)", "remotingHeaderMaxFields"
            )
    elif serialize_type == SerializeType.ROCKETMQ:
        cmd = _decode_rocketmq_header(header, max_fields)
    else:
        raise FrameError(f"unknown serialize type {serialize_type} (0 = JSON, 1 = ROCKETMQ)")
    if body_start < end:
        with memoryview(frame) as view:
            cmd.body = view[body_start:end].tobytes()
    return cmd


def decode_command(frame: bytes | bytearray) -> RemotingCommand:
    """Decode one frame without its leading 4-byte total length: the header-length int32, header, body.

    Raises FrameError (see the module docstring).
    """
    return _decode_frame(frame, 0, len(frame))


class FrameDecoder:
    """Incremental frame decoder for one connection (``NettyDecoder``: a length-prefixed frame of at
    most ``max_frame_length`` bytes including the 4 length bytes, then ``RemotingCommand.decode``).

    :meth:`add` takes bytes as they arrive (frames may be split across reads or coalesced in one);
    :meth:`take` decodes up to ``limit`` of the complete frames held, in order (a server decodes a
    bounded number per turn of its event loop); :meth:`feed` is both, decoding every complete frame.
    The length of a frame is checked as soon as its 4 length bytes arrive, before any of its body is
    buffered, so memory held is at most one frame plus one read. A header may carry at most
    ``max_header_fields`` extFields (:data:`MAX_HEADER_FIELDS`). After a FrameError the decoder is
    unusable (the connection must close).
    """

    __slots__ = ("_buffer", "_failed", "_start", "max_frame_length", "max_header_fields", "max_header_length")

    def __init__(
        self,
        max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH,
        max_header_fields: int = MAX_HEADER_FIELDS,
        max_header_length: int = MAX_HEADER_LENGTH,
    ):
        if max_frame_length < 8:
            raise ValueError(f"max_frame_length must be at least 8 bytes, got {max_frame_length}")
        self.max_frame_length = max_frame_length
        self.max_header_fields = max_header_fields
        self.max_header_length = max_header_length
        """``remotingHeaderMaxLength``: a longer header is refused as soon as its length arrives,
        before any of it is buffered (a NameServer request header is a few hundred bytes)."""
        self._buffer = bytearray()
        self._start = 0
        """Where the first frame not taken yet starts in ``_buffer`` (taken frames are dropped from
        the buffer in one go when the next bytes arrive, not one by one)."""
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes held: complete frames not yet taken and an incomplete one (non-zero at end of stream
        = a truncated frame)."""
        return len(self._buffer) - self._start

    def add(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data``; checks the length of the frame it starts (raises FrameError)."""
        if self._failed:
            raise FrameError("decoder already failed on an earlier frame")
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data
        self._complete_length()

    def _complete_length(self) -> int:
        """The total length of the first frame held when all of it is there, else 0; raises
        FrameError for a length out of bounds."""
        buffer = self._buffer
        start = self._start
        if len(buffer) - start < 4:
            return 0
        (length,) = _INT32.unpack_from(buffer, start)
        if length < 4:
            self._fail()
            raise FrameError(f"frame length {length} is too small (at least 4: the header length)")
        if length + 4 > self.max_frame_length:
            hint = _http_or_tls_hint(bytes(buffer[start : start + 4]))
            self._fail()
            raise FrameError(
                f"frame of {length + 4} bytes is over the {self.max_frame_length}-byte limit{hint}",
                "remotingFrameMaxLength",
            )
        if len(buffer) - start >= 8:
            (marked,) = _INT32.unpack_from(buffer, start + 4)
            header_length = marked & _MAX_HEADER_LENGTH
            if header_length > self.max_header_length:
                self._fail()
                raise FrameError(
                    f"header of {header_length} bytes is over the {self.max_header_length}-byte limit "
                    "(remotingHeaderMaxLength)",
                    "remotingHeaderMaxLength",
                )
        return length + 4 if len(buffer) - start >= length + 4 else 0

    def _fail(self) -> None:
        self._failed = True
        self._buffer = bytearray()
        self._start = 0

    @property
    def has_frame(self) -> bool:
        """Whether a complete frame is held (raises FrameError for a bad length)."""
        return not self._failed and self._complete_length() > 0

    def take(self, limit: int | None = None) -> list[RemotingCommand]:
        """Decode and drop up to ``limit`` (None: every) complete frames held. Raises FrameError."""
        if self._failed:
            raise FrameError("decoder already failed on an earlier frame")
        buffer = self._buffer
        commands: list[RemotingCommand] = []
        try:
            while limit is None or len(commands) < limit:
                total = self._complete_length()
                if not total:
                    break
                start = self._start
                commands.append(_decode_frame(buffer, start + 4, start + total, self.max_header_fields))
                self._start = start + total
            if self._start == len(buffer):  # everything taken: let go of the bytes (a 16 MiB frame too)
                buffer.clear()
                self._start = 0
        except FrameError:
            self._fail()
            raise
        return commands

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add ``data`` and return every command it completes. Raises FrameError (see the module docstring)."""
        self.add(data)
        return self.take()
