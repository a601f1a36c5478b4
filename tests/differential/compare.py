"""Run the differential script against one NameServer, flatten each answer into comparable fields, and
read the table of intended differences from ``docs/compatibility.md``.

Fields of an answer (what is compared, per step)::

    answer               "response", "no response" (oneway) or "connection closed"
    code, remark         the response code and remark
    ext.NAME             each extFields entry of the response header
    header.language      LanguageCode of the response header
    header.version       the ``version`` (MQVersion ordinal) of the response header
    header.serializeType the serialize type of the response frame (JSON / ROCKETMQ)
    body.PATH            the body parsed as RocketMQ's JSON (fastjson's unquoted integer keys read too):
                         objects by key, lists of objects with a ``brokerName`` by broker name
                         (``body.queueDatas[b1].perm``), lists of strings sorted (Java writes HashMap
                         and HashSet order, which means nothing)
    body.intKeys         "quoted" or "unquoted" when the body has integer keys (``brokerAddrs``):
                         old clients get fastjson's unquoted form, 4.9.4+ standard JSON
    body                 the raw body when it is neither empty nor JSON

A GET_NAMESRV_CONFIG body (Java properties text) is compared key by key on the keys both servers have,
except the ones that must differ between two processes (store paths, home, bind address, port).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import FLAG_ONEWAY, SerializeType
from namesrv_grpc.wire import fastjson
from tests.differential.script import CRC, JavaBody, Step
from tests.remoting_support import RemotingTestClient

JAVA_SOURCES = Path(__file__).resolve().parent / "java"

ABSENT = "<absent>"
"""The value of a field one side's answer does not have."""

PATH_KEYS = frozenset({"configStorePath", "kvConfigPath", "rocketmqHome", "bindAddress", "listenPort"})
"""GET_NAMESRV_CONFIG keys whose values are this process's own (paths, where it listens): not compared."""

_UNQUOTED_INT_KEY = re.compile(rb"[{,]-?\d+:")
_QUOTED_INT_KEY = re.compile(rb'[{,]"-?\d+":')


# ------------------------------------------------------------------------------ bodies from Java


def java_bodies(steps: Iterable[Step], libs: Mapping[str, Path], timeout: float = 180) -> dict[JavaBody, bytes]:
    """Encode every :class:`JavaBody` of ``steps`` with RocketMQ's own ``RegisterBrokerBody.encode``:
    one JVM per release ("4" -> ``libs["4"]``, "5" -> ``libs["5"]``), running the single-file programs
    in ``tests/differential/java``. Also checks that each release's ``MQVersion.CURRENT_VERSION`` is the
    version the script sends for it. Raises RuntimeError when a program fails."""
    from tests.differential.script import V4, V5

    wanted: dict[str, list[JavaBody]] = {}
    for step in steps:
        if isinstance(step.body, JavaBody) and step.body not in wanted.setdefault(step.body.release, []):
            wanted[step.body.release].append(step.body)
    encoded: dict[JavaBody, bytes] = {}
    for release, specs in wanted.items():
        program = JAVA_SOURCES / f"RegisterBodies{release}.java"
        completed = subprocess.run(
            ["java", "-Xmx128m", "-cp", f"{libs[release]}/*", str(program)],
            input=json.dumps([spec.spec() for spec in specs]), capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if completed.returncode != 0:
            raise RuntimeError(f"{program.name} failed: {completed.stderr[-3000:]}")
        out = json.loads(completed.stdout.strip().splitlines()[-1])
        expected = {"4": V4, "5": V5}[release]
        if out["version"] != expected:
            raise RuntimeError(
                f"RocketMQ {release}.x jars say CURRENT_VERSION {out['version']}, script uses {expected}"
            )
        for spec, text in zip(specs, out["bodies"], strict=True):
            encoded[spec] = base64.b64decode(text)
    return encoded


# ------------------------------------------------------------------------------ running the script


@dataclass
class Answer:
    """What one server did with one step: ``outcome`` is "response", "no response" or "connection closed"."""

    outcome: str
    response: RemotingCommand | None = None


def _json_frame(command: RemotingCommand, ext: Mapping[str, object]) -> bytes:
    """``command`` with a JSON header whose extFields hold ``ext`` as raw JSON values (wrong types)."""
    header = json.dumps(
        {"code": command.code, "extFields": ext, "flag": command.flag, "language": command.language,
         "opaque": command.opaque, "serializeTypeCurrentRPC": "JSON", "version": command.version},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    return (4 + len(header) + len(command.body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


def run_script(address: str, steps: Sequence[Step], bodies: Mapping[JavaBody, bytes]) -> dict[str, Answer]:
    """Send ``steps`` in order to the NameServer at ``address`` (``host:port``), each over its named
    connection (opened on first use, kept open to the end), and return every step's answer by name."""
    clients: dict[str, RemotingTestClient] = {}
    answers: dict[str, Answer] = {}
    try:
        for step in steps:
            client = clients.get(step.conn)
            if client is None:
                client = clients[step.conn] = RemotingTestClient(address)
            answers[step.name] = _run_step(client, step, bodies)
            if step.settle:
                time.sleep(step.settle)
    finally:
        for client in clients.values():
            client.close()
    return answers


def _run_step(client: RemotingTestClient, step: Step, bodies: Mapping[JavaBody, bytes]) -> Answer:
    if step.raw is not None:
        client.send_raw(step.raw)
        return Answer("connection closed" if client.wait_closed(10) else "connection kept open")
    body = bodies[step.body] if isinstance(step.body, JavaBody) else step.body
    ext = {k: str(zlib.crc32(body) & 0x7FFFFFFF) if v == CRC else v for k, v in step.ext.items()}
    command = client.request(step.code, ext, body, serialize_type=step.serialize_type, version=step.version)
    if step.oneway:
        command.flag |= FLAG_ONEWAY
    if step.json_ext is not None:
        client.send_raw(_json_frame(command, step.json_ext) + body)
    else:
        client.send(command)
    if step.oneway:
        return Answer("response" if not client.nothing_within(0.5) else "no response")
    try:
        return Answer("response", client.receive(command.opaque, timeout=15))
    except ConnectionError:
        return Answer("connection closed")


# ------------------------------------------------------------------------------ flattening


def _flatten(value: Any, path: str, out: dict[str, object]) -> None:
    if isinstance(value, dict):
        if not value:
            out[path] = {}
        for key, item in value.items():
            _flatten(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        if all(isinstance(item, dict) and isinstance(item.get("brokerName"), str) for item in value) and value:
            for item in value:
                _flatten(item, f"{path}[{item['brokerName']}]", out)
        elif all(not isinstance(item, dict | list) for item in value):
            out[path] = sorted(value, key=repr)
        else:
            for index, item in enumerate(sorted(value, key=lambda v: json.dumps(v, sort_keys=True))):
                _flatten(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def _properties(body: bytes) -> dict[str, str]:
    table = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            table[key.strip()] = value.strip()
    return table


def fields(step: Step, answer: Answer) -> dict[str, object]:
    """The comparable fields of ``answer`` (see the module docstring)."""
    out: dict[str, object] = {"answer": answer.outcome}
    response = answer.response
    if response is None:
        return out
    out["code"] = response.code
    out["remark"] = response.remark
    out["header.language"] = response.language
    out["header.version"] = response.version
    out["header.serializeType"] = SerializeType(response.serialize_type).name
    for key, value in response.ext_fields.items():
        out[f"ext.{key}"] = value
    body = response.body
    if not body:
        return out
    if step.body_kind == "properties":
        for key, value in _properties(body).items():
            out[f"body.{key}"] = value
        return out
    try:
        parsed = fastjson.loads(body)
    except ValueError:
        out["body"] = body[:200].decode("utf-8", "replace")
        return out
    _flatten(parsed, "body", out)
    if _UNQUOTED_INT_KEY.search(body):
        out["body.intKeys"] = "unquoted"
    elif _QUOTED_INT_KEY.search(body):
        out["body.intKeys"] = "quoted"
    return out


def differences(step: Step, java: Answer, ours: Answer) -> list[tuple[str, object, object]]:
    """``(field, Java's value, our value)`` for every field that differs (:data:`ABSENT` when one side
    has no such field), in field order."""
    left, right = fields(step, java), fields(step, ours)
    found = []
    for name in sorted(left.keys() | right.keys()):
        one_sided = name not in left or name not in right or name[5:] in PATH_KEYS
        if step.body_kind == "properties" and name.startswith("body.") and one_sided:
            continue
        a, b = left.get(name, ABSENT), right.get(name, ABSENT)
        if a != b:
            found.append((name, a, b))
    return found


# ------------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class IntendedDifference:
    """One row of the "Intended differences" table: steps and fields (glob patterns, ``*`` any), and
    its kind: ``intended`` (must show up: a row no step needs any more fails the suite) or ``pending``
    (a RocketMQ 5.x rule another change brings; may or may not show up yet)."""

    steps: tuple[str, ...]
    fields: tuple[str, ...]
    kind: str
    reason: str

    def covers(self, step: str, field: str) -> bool:
        return any(fnmatchcase(step, s) for s in self.steps) and any(fnmatchcase(field, f) for f in self.fields)


def _patterns(cell: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("`") for p in cell.split(",") if p.strip().strip("`"))


def load_table(doc: Path) -> list[IntendedDifference]:
    """The rows of the first table under the ``## Intended differences`` heading of ``doc``: columns
    Steps | Fields | Java 5.5.0 | Ours | Kind | Reason. Raises ValueError for a malformed row."""
    text = doc.read_text()
    start = text.index("## Intended differences")
    end = text.find("\n## ", start + 1)
    rows = []
    for line in text[start : end if end >= 0 else None].splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].lower() == "steps":
            continue
        if len(cells) != 6:
            raise ValueError(f"intended-differences row needs 6 cells, has {len(cells)}: {line}")
        steps, names, _java, _ours, kind, reason = cells
        if kind not in ("intended", "pending"):
            raise ValueError(f"kind must be intended or pending, got {kind!r}: {line}")
        if not reason:
            raise ValueError(f"a row without a reason: {line}")
        rows.append(IntendedDifference(_patterns(steps), _patterns(names), kind, reason))
    if not rows:
        raise ValueError(f"no rows under '## Intended differences' in {doc}")
    return rows
