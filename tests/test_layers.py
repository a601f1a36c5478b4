"""The shape of the write path (issue 40), read from the imports: the doors (``remoting/``,
``grpc_api/``) build commands; neither the core nor the route-table process, which applies the
commands, imports a door (the body decoders it needs for the compressed and very large bodies the
doors leave to it are in ``wire/``: docs/performance.md). Only the serving process's wiring starts
the doors."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
DOORS = ("namesrv_grpc.remoting", "namesrv_grpc.grpc_api")


def module_file(name: str) -> Path | None:
    path = SRC.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


@functools.cache
def imports_of(name: str) -> frozenset[str]:
    """The modules of this project that ``name`` imports anywhere in its text (type-checking
    imports and imports inside functions too)."""
    path = module_file(name)
    assert path is not None, name
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return frozenset(m for m in found if m.startswith("namesrv_grpc") and module_file(m) is not None)


@functools.cache
def import_parents(start: str) -> dict[str, str | None]:
    """Every module of this project that ``start`` imports, directly or through others, with the
    module it was first reached from (None for ``start``)."""
    parent: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        current = todo.pop()
        for imported in sorted(imports_of(current)):
            if imported not in parent:
                parent[imported] = current
                todo.append(imported)
    return parent


def reachable(start: str) -> set[str]:
    """Every module of this project that ``start`` imports, directly or through others."""
    return set(import_parents(start))


def door_paths(start: str) -> list[str]:
    """Each way from ``start`` to a door module, as 'start -> ... -> door'."""
    parent = import_parents(start)
    paths = []
    for module in sorted(parent):
        if module.startswith(DOORS):
            chain = [module]
            while (up := parent[chain[-1]]) is not None:
                chain.append(up)
            paths.append(" -> ".join(reversed(chain)))
    return paths


CORE = sorted(
    "namesrv_grpc.core." + path.stem for path in (SRC / "namesrv_grpc" / "core").glob("*.py") if path.stem != "__init__"
)


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_no_door(module: str) -> None:
    assert door_paths(module) == []


@pytest.mark.parametrize(
    "module", ["namesrv_grpc.processes.route_table_process", "namesrv_grpc.processes.route_table_service"]
)
def test_the_route_table_process_imports_no_door(module: str) -> None:
    """The body decoders it needs (compressed and large bodies) are in ``wire/``, not in a door."""
    assert door_paths(module) == []
    assert "namesrv_grpc.wire.remoting_register_body" in reachable(module)
    assert "namesrv_grpc.wire.grpc_register_body" in reachable(module)


WIRE = sorted(
    "namesrv_grpc.wire." + path.stem for path in (SRC / "namesrv_grpc" / "wire").glob("*.py") if path.stem != "__init__"
)


@pytest.mark.parametrize("module", WIRE)
def test_the_wire_formats_import_only_the_core(module: str) -> None:
    imported = {m for m in reachable(module) if m.startswith("namesrv_grpc.")}
    assert {m for m in imported if not m.startswith(("namesrv_grpc.core", "namesrv_grpc.wire"))} == set()


def test_the_serving_process_starts_both_doors() -> None:
    """What the check above would miss if it read no import at all."""
    paths = door_paths("namesrv_grpc.processes.serving_process")
    assert any(".remoting." in path for path in paths)
    assert any(".grpc_api." in path for path in paths)


SERVING_SIDE = [
    *sorted(
        f"namesrv_grpc.{door}.{path.stem}"
        for door in ("remoting", "grpc_api")
        for path in (SRC / "namesrv_grpc" / door).glob("*.py")
        if path.stem != "__init__"
    ),
    "namesrv_grpc.processes.serving_process",
]


@pytest.mark.parametrize("module", SERVING_SIDE)
def test_the_serving_side_holds_the_reader_not_the_writer(module: str) -> None:
    """A serving process answers from a ``NameServerReader`` and writes only by commands: neither
    door nor the serving process's wiring can reach the writer (``core/processor.py``)."""
    assert "namesrv_grpc.core.processor" not in reachable(module)


SERVER_ROOMS = ("core", "remoting", "grpc_api", "processes", "security", "runtime")


@pytest.mark.parametrize(
    "module",
    sorted(
        f"namesrv_grpc.{room}.{path.stem}"
        for room in SERVER_ROOMS
        for path in (SRC / "namesrv_grpc" / room).glob("*.py")
        if path.stem != "__init__"
    ),
)
def test_the_server_rooms_import_no_client_code(module: str) -> None:
    """Client code (``namesrv_grpc.client``: the remoting client, client credentials, the route
    cache) is for the programs that call a NameServer; no module of the server reaches it."""
    assert not {m for m in reachable(module) if m.startswith("namesrv_grpc.client")}


DOOR_MODULES = sorted(path for door in ("remoting", "grpc_api") for path in (SRC / "namesrv_grpc" / door).glob("*.py"))


@pytest.mark.parametrize("path", DOOR_MODULES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_doors_read_through_the_reader(path: Path) -> None:
    """A door reads what its ``NameServerReader`` offers and never reaches past it into the route
    table it holds (``.route_table``)."""
    reached = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "route_table"
    ]
    assert reached == [], f"{path.name} reads .route_table at lines {reached}"
