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


#: The build steps: pure functions of plain model types (no client, no network, no database, no event loop).
PURE = ("agent/holders/attribution.py", "agent/holders/assignment.py", "agent/exporters/dcgm.py",
        "agent/holders/dra.py", "agent/holders/dra_attribution.py", "agent/holders/hami.py",
        "agent/holders/sharing.py", "agent/holders/amd.py", "agent/holders/gaudi.py", "agent/holders/measured.py",
        "agent/exporters/amd.py", "agent/exporters/gaudi.py", "agent/exporters/per_pod.py",
        "aggregator/books/gauges.py",
        "aggregator/kube/objects.py", "model/shard_spec.py")
IMPURE = ("exporter.clients", "aiohttp", "asyncio", "grpc", "h2", "kubernetes_asyncio", "psycopg", "sqlite3", "socket")


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_client(name: str) -> None:
    """The attribution is tested with plain values: it takes model types, never a client module's."""
    path = PACKAGE / name
    assert [n for n in _imports(path) if any(n == f or n.startswith(f + ".") for f in IMPURE)] == []


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


NUMERIC_CALLS = frozenset({"float", "int", "Decimal", "money", "round", "abs", "sum", "min", "max"})
DB_CALLS = frozenset({"query", "fetch", "query_sync", "execute"})

#: Numbers at a literal index that are not accounting values: the expressions, and why.
INDEX_ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    "aggregator/kube/state.py": (frozenset({"out[ns][0]", "out[ns][1]", "best[0]", "best[1]"}),
                                "a ResourceQuota's (hard, used) GPU counts, compared for headroom: not booked"),
    "aggregator/ledger/postgres.py": (frozenset({"m[1]", "m[2]", "tx.fetch(f'SELECT COUNT(*) FROM {name}')[0][0]"}),
                                      "year and month in a partition's name; the rows of a partition dropped"),
    "aggregator/ledger/backend.py": (frozenset({"found[0][0]"}), "the ledger's schema version"),
    "sim/scenario_pod_fields.py": (frozenset({"memory[0]"}), "a simulated GPU's memory (MiB) against a pod's request"),
}


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return ""


def _literal_index(node: ast.AST) -> bool:
    """``v[3]``; not a part of what a call returned (``text.split()[0]``, ``sock.getsockname()[1]``) unless
    the call is a query."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant | ast.UnaryOp)
            and isinstance(ast.literal_eval(node.slice), int)):
        return False
    base = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return not isinstance(base, ast.Call) or _call_name(base) in DB_CALLS


def _numeric_uses(tree: ast.AST) -> list[ast.AST]:
    """Expressions used as numbers: converted, summed, in arithmetic or ordered comparisons."""
    used: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in NUMERIC_CALLS:
            used += node.args
        elif isinstance(node, ast.BinOp):
            used += [node.left, node.right]
        elif isinstance(node, ast.UnaryOp):
            used.append(node.operand)
        elif isinstance(node, ast.AugAssign):
            used.append(node.value)
        elif isinstance(node, ast.Compare) and all(isinstance(o, ast.Lt | ast.LtE | ast.Gt | ast.GtE)
                                                   for o in node.ops):
            used += [node.left, *node.comparators]
    return used


_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of one scope (a module, a function, a lambda), not those of the scopes inside it."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, _SCOPES):
            todo += ast.iter_child_nodes(node)
    return out


def _db_rows(nodes: list[ast.AST]) -> tuple[set[str], list[tuple[ast.AST, ast.AST]]]:
    """Names bound to one database row (``for r in query(...)``, ``r = fetch(...)[0]``) in one scope, and
    every (target, source) binding of the scope."""
    results: set[str] = set()
    bindings: list[tuple[ast.AST, ast.AST]] = []
    loops = {id(n.iter) for n in nodes if isinstance(n, ast.For | ast.comprehension)}
    for node in nodes:
        if isinstance(node, ast.For | ast.comprehension):
            bindings.append((node.target, node.iter))
        elif isinstance(node, ast.Assign):
            bindings += [(t, node.value) for t in node.targets]
    for target, source in bindings:
        if isinstance(target, ast.Name) and _call_name(source) in DB_CALLS:
            results.add(target.id)  # a whole result: its rows are what is iterated
    rows: set[str] = set()
    for target, source in bindings:
        if not isinstance(target, ast.Name):
            continue
        whole = _call_name(source) in DB_CALLS or (isinstance(source, ast.Name) and source.id in results)
        first = isinstance(source, ast.Subscript) and _call_name(source.value) in DB_CALLS
        if (whole and id(source) in loops) or first:
            rows.add(target.id)
    return rows, bindings


def _index_reads(path: Path) -> list[str]:
    """How numbers get read by position: a number at a literal index (``float(r[14])``, ``v[3] + 1``), a
    database row read by position (``r[k + 1]``, ``r[n:]``, ``a, b = r``), a rest of a row counted off
    (``node, *vals in tx.fetch(...)``), and a vector built as ``[0.0] * n``."""
    found = []
    tree = ast.parse(path.read_text())

    def hit(node: ast.AST) -> None:
        found.append(f"{path.name}:{getattr(node, 'lineno', 0)} {ast.unparse(node)}")

    for node in _numeric_uses(tree):
        if _literal_index(node):
            hit(node)
    for node in ast.walk(tree):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.List)
                and all(isinstance(e, ast.Constant) and isinstance(e.value, int | float) for e in node.left.elts)):
            hit(node)
    for scope in (n for n in ast.walk(tree) if isinstance(n, _SCOPES)):
        nodes = _own_nodes(scope)
        rows, bindings = _db_rows(nodes)
        for node in nodes:
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in rows:
                hit(node)
        for target, source in bindings:
            if not isinstance(target, ast.Tuple):
                continue
            unpacked = isinstance(source, ast.Name) and source.id in rows
            rest = any(isinstance(e, ast.Starred) for e in target.elts) and _call_name(source) in DB_CALLS
            if unpacked or rest:
                hit(target)
    return sorted(set(found))


def _allowed(rel: str, finding: str) -> bool:
    exprs, _why = INDEX_ALLOWED.get(rel, (frozenset(), ""))
    return finding.split(" ", 1)[1] in exprs


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_accounting_value_read_by_index(path: Path) -> None:
    """Every module of exporter/ reads amounts by name (``model/books.py``, ``model/named_rows.py``)."""
    rel = str(path.relative_to(PACKAGE))
    assert [f for f in _index_reads(path) if not _allowed(rel, f)] == []


def test_index_allowlist_is_used() -> None:
    """An allowance nothing needs any more goes."""
    unused = [rel for rel in INDEX_ALLOWED if not any(_allowed(rel, f) for f in _index_reads(PACKAGE / rel))]
    assert unused == []


@pytest.mark.parametrize(("source", "hits"), [
    ("v = [0.0] * 3\nx = v[3] + 1\n", 2),
    ("c = float(r[14])\nif cur[3] < prev[3]:\n    pass\n", 3),
    ("for r in query('SELECT ...', ()):\n    a, b = r[k + 1], r[n:]\n    c, d = r\n", 3),
    ("rows = tx.fetch('SELECT ...')\nout = [r[2] for r in rows]\n", 1),
    ("for node, *vals in tx.fetch('SELECT ...'):\n    pass\nfirst = query('SELECT ...', ())[0]\nx = first[1]\n", 2),
    ("name = parts[1]\nfirst = rows[0]\nhead = text[:n]\nfor ns, team in query('', ()):\n    pass\n", 0),
])
def test_index_check_sees_an_index(tmp_path: Path, source: str, hits: int) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert len(_index_reads(probe)) == hits
