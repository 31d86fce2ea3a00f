"""The shape of the code, checked: layers (ARCHITECTURE.md), no import cycle, small modules, and no
accounting value read by position."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "exporter"
MAX_MODULE_LINES = 350

FORBIDDEN = {
    "model": ("aiohttp", "grpc", "kubernetes_asyncio", "sqlite3", "exporter.agent", "exporter.aggregator",
              "exporter.sim", "exporter.clients", "exporter.cli", "exporter.pipeline"),
    "agent": ("exporter.aggregator", "exporter.sim", "exporter.cli", "exporter.pipeline", "kubernetes_asyncio",
              "sqlite3"),
    "aggregator": ("exporter.agent", "exporter.sim", "exporter.cli", "exporter.pipeline", "grpc"),
    "sim": ("exporter.agent", "exporter.aggregator", "exporter.cli", "exporter.pipeline"),
    "clients": ("exporter.agent", "exporter.aggregator", "exporter.sim", "exporter.cli", "exporter.pipeline"),
}


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_pb2" not in p.name)


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports: at module level, inside functions and under TYPE_CHECKING alike."""
    names: set[str] = set()
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_import_layers(layer: str) -> None:
    """model is pure; agent and aggregator never import each other; nothing below the CLI imports sim."""
    offenders = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        if "_pb2" in path.name:
            continue
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert offenders == []


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in _sources()}
    return {m: {n for n in _imports(p) if n in modules and n != m and p.name != "__init__.py"}
            for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path, or [] (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*stack[stack.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_no_import_cycle() -> None:
    """Pass a module what it reads instead of importing the daemon: no cycle anywhere in exporter/."""
    assert _cycle(_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_modules_are_small() -> None:
    big = {str(p.relative_to(REPO)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert big == {}


READ_SIDE = ["aggregator/booking.py", "aggregator/ledger.py", "aggregator/metrics.py", "aggregator/gauges.py",
             "aggregator/status_page.py", "aggregator/status_trends.py", "aggregator/status_charts.py",
              "aggregator/status_savings.py", "aggregator/service.py", "model/books.py"]


def _index_reads(path: Path) -> list[str]:
    """Subscripts by a literal integer, and vectors built as ``[0.0] * n``: how numbers were read by position."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(
                node.slice.value, int):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.List):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("name", READ_SIDE)
def test_no_accounting_value_read_by_index(name: str) -> None:
    """Booking, ledger, metrics and the status page read amounts by name (``model/books.py``)."""
    assert _index_reads(PACKAGE / name) == []


def test_index_check_sees_an_index() -> None:
    probe = REPO / "tests" / "unit" / "_probe_index.py"
    probe.write_text("v = [0.0] * 3\nx = v[3]\n")
    try:
        assert len(_index_reads(probe)) == 2
    finally:
        probe.unlink()
