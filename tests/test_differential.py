"""The differential suite (issue 18): the script of ``tests/differential/script.py`` sent to a fresh
Apache RocketMQ 5.5.0 Java NameServer (the judge) and to a fresh one of ours; every answer compared
field by field. A difference not in the "Intended differences" table of ``docs/compatibility.md``
fails, and so does an ``intended`` row no step needs. REGISTER_BROKER bodies are encoded by RocketMQ's
own classes (4.9.7 for 4.x brokers, 5.5.0 for 5.x). One Java NameServer JVM for the module.

The comparator and the table reader are tested here too, without Java (``test_comparator_*``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import FLAG_RESPONSE, RequestCode, SerializeType
from tests.differential.compare import (
    ABSENT,
    Answer,
    IntendedDifference,
    differences,
    java_bodies,
    load_table,
    run_script,
)
from tests.differential.script import FRAMES, SCRIPT, JavaBody, Step
from tests.rocketmq_support import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    java_processes,
    lib_dir,
    require_rocketmq,
    start_java_namesrv,
)
from tests.support import ROOT, running_namesrv

DOC = ROOT / "docs" / "compatibility.md"
STEPS = [*SCRIPT, *FRAMES]
BY_NAME = {step.name: step for step in STEPS}


@dataclass
class Run:
    java: dict[str, Answer]
    ours: dict[str, Answer]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    require_rocketmq(ROCKETMQ_5, ROCKETMQ_4)
    workdir = tmp_path_factory.mktemp("differential")
    bodies = java_bodies(STEPS, {"4": lib_dir(ROCKETMQ_4), "5": lib_dir(ROCKETMQ_5)})
    with java_processes() as started:
        java = start_java_namesrv(ROCKETMQ_5, workdir / "java")
        started.append(java)
        java_answers = run_script(java.addr, STEPS, bodies)
    with running_namesrv(workdir / "ours") as ours:
        our_answers = run_script(ours.remoting_address, STEPS, bodies)
    return Run(java_answers, our_answers)


@pytest.fixture(scope="module")
def table() -> list[IntendedDifference]:
    return load_table(DOC)


def _explained(step: str, found: list[tuple[str, object, object]], table: list[IntendedDifference]) -> list[str]:
    return [
        f"{field}: Java {java!r:.300} / ours {ours!r:.300}"
        for field, java, ours in found
        if not any(row.covers(step, field) for row in table)
    ]


@pytest.mark.parametrize("name", [step.name for step in STEPS])
def test_same_answer_as_java_or_an_intended_difference(run: Run, table: list[IntendedDifference], name: str) -> None:
    found = differences(BY_NAME[name], run.java[name], run.ours[name])
    unexplained = _explained(name, found, table)
    assert not unexplained, f"{name}: differences not in docs/compatibility.md:\n" + "\n".join(unexplained)


def test_every_intended_difference_still_shows(run: Run, table: list[IntendedDifference]) -> None:
    """A row of kind ``intended`` no step needs is stale: the table must say exactly what differs."""
    found = [(s.name, f) for s in STEPS for f, _, _ in differences(s, run.java[s.name], run.ours[s.name])]
    stale = [row for row in table if row.kind == "intended" and not any(row.covers(s, f) for s, f in found)]
    assert not stale, f"rows of docs/compatibility.md no step needs any more: {stale}"


def test_the_java_nameserver_really_answered(run: Run) -> None:
    """The judge did its job: it answered (or closed / stayed silent where it must), and registrations
    it accepts are seen in its routes (so a dead or misconfigured JVM cannot make the suite pass)."""
    outcomes = {name: answer.outcome for name, answer in run.java.items()}
    assert outcomes["read/heartbeat-oneway"] == "no response"
    assert outcomes["frame/header-not-json"] == "connection closed"
    assert all(o == "response" for n, o in outcomes.items() if not n.startswith("frame/") and "oneway" not in n)
    route = run.java["route/5x-client"].response
    assert route is not None
    assert route.code == 0
    assert b'"b1"' in route.body
    assert b'"b4"' in route.body


# ---------------------------------------------------------------------------- the script's coverage


def test_script_covers_every_request_code_both_serializations_and_both_broker_lines() -> None:
    codes = {step.code for step in SCRIPT}
    assert {int(code) for code in RequestCode} <= codes
    assert any(step.serialize_type == SerializeType.ROCKETMQ for step in SCRIPT)
    java_bodies_used = [step.body for step in SCRIPT if isinstance(step.body, JavaBody)]
    assert {(body.release, body.compressed) for body in java_bodies_used} == {
        ("4", False), ("4", True), ("5", False), ("5", True)
    }  # fmt: skip
    assert len({step.name for step in STEPS}) == len(STEPS), "step names must be unique"


# ---------------------------------------------------------------------------- the comparator itself


def _answer(code: int = 0, remark: str | None = None, body: bytes = b"", **ext: str) -> Answer:
    return Answer("response", RemotingCommand(code, 1, FLAG_RESPONSE, remark, dict(ext), body, "JAVA", 513))


def test_comparator_finds_a_different_code_remark_ext_and_body_field() -> None:
    step = Step("t/x", RequestCode.GET_ROUTEINFO_BY_TOPIC)
    java = _answer(0, None, b'{"queueDatas":[{"brokerName":"b1","perm":6}]}', a="1")
    ours = _answer(1, "no", b'{"queueDatas":[{"brokerName":"b1","perm":4}]}', a="2")
    assert differences(step, java, ours) == [
        ("body.queueDatas[b1].perm", 6, 4),
        ("code", 0, 1),
        ("ext.a", "1", "2"),
        ("remark", None, "no"),
    ]
    assert differences(step, java, Answer("connection closed"))[0] == ("answer", "response", "connection closed")
    assert ("ext.a", "1", ABSENT) in differences(step, java, _answer(0, None, java.response.body))  # type: ignore[union-attr]


def test_comparator_ignores_hash_order_but_not_integer_key_quoting() -> None:
    step = Step("t/x", RequestCode.GET_ROUTEINFO_BY_TOPIC)
    java = _answer(body=b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{0:"x"}},{"brokerName":"b"}],"t":["p","q"]}')
    same = _answer(body=b'{"t":["q","p"],"brokerDatas":[{"brokerName":"b"},{"brokerAddrs":{0:"x"},"brokerName":"a"}]}')
    quoted = _answer(
        body=b'{"t":["q","p"],"brokerDatas":[{"brokerName":"b"},{"brokerAddrs":{"0":"x"},"brokerName":"a"}]}'
    )
    assert differences(step, java, same) == []
    assert differences(step, java, quoted) == [("body.intKeys", "unquoted", "quoted")]


def test_comparator_reads_config_bodies_on_common_keys_without_paths() -> None:
    step = Step("t/c", RequestCode.GET_NAMESRV_CONFIG, body_kind="properties")
    java = _answer(body=b"a=1\nkvConfigPath=/x\njavaOnly=1\n")
    ours = _answer(body=b"a=2\nkvConfigPath=/y\noursOnly=3\n")
    assert differences(step, java, ours) == [("body.a", "1", "2")]


def test_table_rows_cover_by_glob_and_malformed_rows_are_refused(tmp_path: Path) -> None:
    doc = tmp_path / "c.md"
    doc.write_text(
        "# x\n## Intended differences\n\n| Steps | Fields | Java 5.5.0 | Ours | Kind | Reason |\n"
        "|---|---|---|---|---|---|\n"
        "| `a/*`, `b/c` | `ext.*` | 1 | 2 | intended | because |\n## Next\n| x | y |\n"
    )
    [row] = load_table(doc)
    assert row.covers("a/z", "ext.q")
    assert row.covers("b/c", "ext.r")
    assert not row.covers("b/d", "ext.q")
    assert not row.covers("a/z", "code")
    doc.write_text("## Intended differences\n| `a` | `b` | 1 | 2 | maybe | r |\n")
    with pytest.raises(ValueError, match="kind"):
        load_table(doc)
    doc.write_text("## Intended differences\n| `a` | `b` | 1 | 2 | intended | |\n")
    with pytest.raises(ValueError, match="reason"):
        load_table(doc)


def test_the_documented_table_reads() -> None:
    rows = load_table(DOC)
    assert {row.kind for row in rows} <= {"intended", "pending"}
    assert any(row.kind == "intended" for row in rows)
