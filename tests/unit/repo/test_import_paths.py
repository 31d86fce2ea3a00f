"""No path of imports from one daemon to the other, nor from either daemon to the simulator, however many
shared modules (settings, model, clients) it runs through: the layer rule holds for what a process loads,
not only for what a file names."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "exporter"

#: (from, to): no module under ``exporter.<from>`` may reach one under ``exporter.<to>``.
FORBIDDEN_PATHS = (("agent", "aggregator"), ("aggregator", "agent"), ("agent", "sim"), ("aggregator", "sim"))

#: What ``gpu-cost-exporter agent`` imports before the agent runs: the entry point, then (in the command) these.
AGENT_COMMAND = ("exporter.cli", "exporter.logs", "exporter.agent.exporters.dcgm", "exporter.agent.service",
                 "exporter.agent.nvml")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _parents(name: str) -> list[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _imported(path: Path, name: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` (module ``name``) loads: at module level, inside functions and
    under TYPE_CHECKING alike, relative imports resolved, ``from pkg import module`` as the module."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
        for target in targets:
            found.update(m for m in (*_parents(target), target) if m in modules)
    return found


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each module under ``root`` (its parent directory holds the top package) and the modules it loads,
    its own parent packages included."""
    base = root.parent
    paths = {_module_name(p, base): p for p in sorted(root.rglob("*.py")) if "_pb2" not in p.name}
    modules = set(paths)
    return {m: (_imported(p, m, modules) | {q for q in _parents(m) if q in modules}) - {m} for m, p in paths.items()}


def import_path(graph: dict[str, set[str]], start: str, forbidden: str) -> list[str]:
    """The shortest chain of imports from ``start`` to a module in package ``forbidden``, or []."""
    came: dict[str, str] = {start: ""}
    todo = deque([start])
    while todo:
        m = todo.popleft()
        if m == forbidden or m.startswith(forbidden + "."):
            chain = [m]
            while came[chain[-1]]:
                chain.append(came[chain[-1]])
            return chain[::-1]
        for n in sorted(graph.get(m, ()), key=lambda n: (-n.count("."), n)):  # a.b.c before its package a.b
            if n not in came:
                came[n] = m
                todo.append(n)
    return []


def _short(chain: list[str]) -> str:
    return " → ".join(m.removeprefix("exporter.") for m in chain)


def violations(graph: dict[str, set[str]], pairs: tuple[tuple[str, str], ...] = FORBIDDEN_PATHS) -> list[str]:
    """Every forbidden path, one line each (``agent.service → config → aggregator.shards``)."""
    out = []
    for src, dst in pairs:
        for m in sorted(graph):
            inside = m == f"exporter.{src}" or m.startswith(f"exporter.{src}.")
            if inside and (chain := import_path(graph, m, f"exporter.{dst}")):
                out.append(_short(chain))
    return out


@pytest.mark.parametrize(("src", "dst"), FORBIDDEN_PATHS)
def test_no_import_path_between_layers(src: str, dst: str) -> None:
    """Followed through every shared module, no ``src`` module loads a ``dst`` one."""
    graph = module_graph(PACKAGE)
    assert any(m.startswith(f"exporter.{src}.") for m in graph), src
    found = violations(graph, ((src, dst),))
    assert found == [], "\n".join(found)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "exporter"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_path_through_shared_modules_is_found_and_printed(tmp_path: Path) -> None:
    """agent → config (absolute) → settings (relative, inside a function) → aggregator (``from pkg import module``)
    is a violation, printed hop by hop; the shared modules alone are not."""
    root = _package(tmp_path, {
        "agent/__init__.py": "", "agent/service.py": "from exporter.config import Settings\n",
        "config.py": "def load():\n    from .settings import parse\n",
        "settings.py": "from exporter.aggregator import shards\n",
        "aggregator/__init__.py": "", "aggregator/shards.py": "",
    })
    graph = module_graph(root)
    assert violations(graph) == ["agent.service → config → settings → aggregator.shards"]
    (root / "settings.py").write_text("import json\n")
    assert violations(module_graph(root)) == []


def test_a_package_init_is_a_hop(tmp_path: Path) -> None:
    """Importing ``exporter.shared.x`` runs ``exporter/shared/__init__.py``: what that loads counts too."""
    root = _package(tmp_path, {
        "agent/__init__.py": "", "agent/service.py": "from exporter.shared.x import y\n",
        "shared/__init__.py": "from ..sim import world\n", "shared/x.py": "",
        "sim/__init__.py": "", "sim/world.py": "",
    })
    assert violations(module_graph(root)) == ["agent.service → shared → sim.world"]


RUNTIME_CHECK = r"""
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from exporter.cli import _settings, build_parser
from exporter.config import AgentSettings
_settings(AgentSettings, build_parser().parse_args(["agent", "--node-name", "n"]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("exporter.aggregator", "exporter.sim")))))
"""


def test_the_agent_command_loads_no_aggregator_module() -> None:
    """In a fresh interpreter, what the agent command imports (entry point, settings, service) leaves
    no ``exporter.aggregator`` or ``exporter.sim`` module in ``sys.modules``."""
    proc = subprocess.run([sys.executable, "-c", RUNTIME_CHECK, *AGENT_COMMAND], capture_output=True, text=True,
                          check=True, cwd=REPO)
    loaded = json.loads(proc.stdout)
    assert loaded == [], loaded
