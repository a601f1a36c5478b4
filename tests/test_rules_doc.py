"""docs/rules.md is where the rule ids the repository cites are written down: every cited id has a
section there naming its RocketMQ source, our code and its tests, and those tests exist; no file
points readers at a document they cannot find."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

RULES = ROOT / "docs" / "rules.md"
THIS = Path(__file__).resolve()
CITING = ["README.md", "docs", "src", "analytics", "protos", "deploy", "scripts", "bench", "tests", "examples"]
SUFFIXES = {".md", ".py", ".proto", ".yml", ".yaml", ".json", ".sh"}


def repository_files() -> list[Path]:
    files: list[Path] = []
    for entry in CITING:
        path = ROOT / entry
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in path.rglob("*")
                if p.is_file() and p.suffix in SUFFIXES and "_pb2" not in p.name and ".egg-info" not in str(p)
            )
    return files


def sections() -> dict[str, str]:
    """Rule id -> its section of docs/rules.md."""
    parts = re.split(r"^### (S\d\d) ", RULES.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_cited_rule_id_is_written_down() -> None:
    defined = set(sections())
    assert defined == ({f"S{n:02d}" for n in range(1, 45)} - {"S28", "S29"}) | {"S50", "S51", "S52", "S53"}
    for path in repository_files():
        if path in (RULES, THIS):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        cited = set(re.findall(r"\bS([0-5]\d)\b", text)) | set(re.findall(r"\btest_s([0-5]\d)_", text))
        for number in cited:
            assert f"S{number}" in defined, f"{path.relative_to(ROOT)} cites S{number}, which docs/rules.md lacks"


def test_each_rule_names_its_source_code_and_tests() -> None:
    test_sources = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py")}
    for rule, text in sections().items():
        for part in ("- RocketMQ:", "- Here:", "- Tests:"):
            assert part in text, f"{rule}: no {part!r} line"
        tests_line = text.split("- Tests:", 1)[1]
        named_files = re.findall(r"`(test_[a-z0-9_]+\.py)`", tests_line)
        assert named_files, f"{rule}: names no test file"
        for name in named_files:
            assert name in test_sources, f"{rule}: tests/{name} does not exist"
        for function in re.findall(r"`(test_[a-z0-9_]+)`", tests_line):
            assert any(f"def {function}(" in source for source in test_sources.values()), f"{rule}: no {function}"
        assert any(f"test_s{rule[1:]}_" in source for source in test_sources.values()) or rule in ("S27",), (
            f"{rule}: no test named test_s{rule[1:]}_..."
        )


def test_no_file_points_at_a_document_outside_the_repository() -> None:
    for path in repository_files():
        if path == THIS:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        assert "SEMANTICS" not in text, f"{path.relative_to(ROOT)} cites SEMANTICS (use docs/rules.md)"


def test_the_code_links_to_the_rules() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/rules.md)" in readme
    for proto in (ROOT / "protos" / "namesrv" / "v1").glob("*.proto"):
        text = proto.read_text(encoding="utf-8")
        if re.search(r"\bS\d\d\b", text):
            assert "docs/rules.md" in text, proto.name
