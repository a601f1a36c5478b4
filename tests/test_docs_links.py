"""The README is a short guide that links into docs/ (issue 22): every relative link of README.md and
docs/*.md must reach a file, and every ``#anchor`` a heading of that file, so moving text between
pages cannot leave a reader at a dead link."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            out.append((number, line))
    return out


def anchors(path: Path) -> set[str]:
    return {anchor(line.lstrip("#")) for _, line in prose_lines(path) if line.startswith("#")}


def broken_links(path: Path) -> list[str]:
    broken: list[str] = []
    for number, line in prose_lines(path):
        for link in LINK.findall(line):
            if re.match(r"[a-z]+:", link):
                continue
            target_name, _, fragment = link.partition("#")
            target = (path.parent / target_name) if target_name else path
            where = f"{path.parent.name}/{path.name}:{number}: {link}"
            if not target.exists():
                broken.append(f"{where} (no such file)")
            elif fragment and target.suffix == ".md" and fragment not in anchors(target):
                broken.append(f"{where} (no such heading)")
    return broken


def test_readme_and_docs_links_reach_their_targets() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [b for page in pages for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_guide_that_links_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 400
    for heading in (
        "## Two commands",
        "## Running it",
        "## Migrating a cluster step by step with `compare`",
        "## Calling it from another language",
        "## Where to read more",
    ):
        assert heading in readme
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", readme))
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert on_disk <= linked, f"docs pages the README does not link: {sorted(on_disk - linked)}"


def test_the_check_sees_a_dead_link(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text("# Probe\n\n[gone](nowhere.md) [here](#probe) [no](#nothing)\n```\n[code](ignored.md)\n```\n")
    assert broken_links(page) == [
        f"{tmp_path.name}/probe.md:3: nowhere.md (no such file)",
        f"{tmp_path.name}/probe.md:3: #nothing (no such heading)",
    ]
