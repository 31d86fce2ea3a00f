"""The package's folders are its architecture: small folders, layered sub-packages, and no cycle between
packages (a module-level DAG can still tie two packages into a knot, e.g. aggregator <-> export)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.repo.test_architecture import PACKAGE, _cycle, _graph, _module

MAX_PACKAGE_MODULES = 20

AGGREGATOR_PARTS = ("ledger", "kube", "books", "advice", "fleet", "focus", "web")

#: What each aggregator sub-package may not import (the rest of the aggregator, above it). ``service`` wires
#: them all and is imported by none.
SUBPACKAGE_FORBIDDEN: dict[str, tuple[str, ...]] = {
    "ledger": ("kube", "books", "advice", "fleet", "focus", "web", "service"),
    "kube": ("ledger", "books", "advice", "fleet", "focus", "web", "service"),
    "books": ("advice", "fleet", "focus", "web", "service"),
    "advice": ("books", "fleet", "focus", "web", "service"),
    "fleet": ("advice", "focus", "web", "service"),
    "focus": ("advice", "fleet", "web", "service"),
    "web": ("fleet", "service"),
}


def _package_dirs() -> list[Path]:
    return sorted({p.parent for p in PACKAGE.rglob("*.py")})


def test_no_package_folder_holds_more_than_twenty_modules() -> None:
    """A folder a reader can take in at a glance: past 20 modules it needs sub-packages."""
    crowded = {str(d.relative_to(REPO)): n for d in _package_dirs()
               if (n := len([p for p in d.glob("*.py") if p.name != "__init__.py" and "_pb2" not in p.name]))
               > MAX_PACKAGE_MODULES}
    assert crowded == {}


def test_every_sub_package_says_what_it_owns() -> None:
    """Each ``__init__.py`` of the aggregator's and model's sub-packages carries a paragraph (what it owns and
    what it may import)."""
    bare = []
    for d in _package_dirs():
        init = d / "__init__.py"
        if d.parent.name in {"agent", "aggregator", "model", "sim"} and d.name != "proto":
            doc = init.read_text().strip() if init.exists() else ""
            if len(doc) < 80 or not doc.startswith('"""'):
                bare.append(str(d.relative_to(REPO)))
    assert bare == []


#: What each of the agent's sub-packages may not import: the agent's top-level modules wire both, and what the
#: exporters say is read without knowing who holds a device.
AGENT_FORBIDDEN: dict[str, tuple[str, ...]] = {"exporters": ("holders", "*"), "holders": ("*",)}


def _agent_part(module: str) -> str | None:
    """``exporters``/``holders`` for a module of those sub-packages, ``*`` for the agent's top-level modules."""
    parts = module.split(".")
    if parts[:2] != ["exporter", "agent"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in AGENT_FORBIDDEN else "*"


@pytest.mark.parametrize("part", sorted(AGENT_FORBIDDEN))
def test_agent_sub_package_layers(part: str) -> None:
    """The holders join the exporters' device records; neither imports the service, meter or state that wire
    them, and the exporters' readers never import the holders."""
    offenders = [f"{m} imports {n}" for m, deps in _graph().items() if _agent_part(m) == part
                 for n in deps if _agent_part(n) in AGENT_FORBIDDEN[part]]
    assert offenders == []


def test_agent_part_names_each_module() -> None:
    assert _agent_part("exporter.agent.holders.kai") == "holders"
    assert _agent_part("exporter.agent.exporters.dcgm") == "exporters"
    assert _agent_part("exporter.agent.meter") == "*"
    assert _agent_part("exporter.agent.holders") == "holders"
    assert _agent_part("exporter.aggregator.books") is None


def _part(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["exporter", "aggregator"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in (*AGGREGATOR_PARTS, "service") else None


@pytest.mark.parametrize("part", sorted(SUBPACKAGE_FORBIDDEN))
def test_aggregator_sub_package_layers(part: str) -> None:
    """E.g. the ledger imports nothing of books, web or advice: a change to the ledger cannot depend on them."""
    offenders = [f"{m} imports {n}" for m, deps in _graph().items() if _part(m) == part
                 for n in deps if _part(n) in SUBPACKAGE_FORBIDDEN[part]]
    assert offenders == []


def _unit(module: str) -> str:
    """The package a module counts towards: an aggregator sub-package, else ``exporter``'s top-level
    package or module."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "aggregator" and parts[2] in AGGREGATOR_PARTS:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages: A -> B when any module of A imports one of B."""
    out: dict[str, set[str]] = {}
    for m, deps in modules.items():
        out.setdefault(_unit(m), set()).update(u for n in deps if (u := _unit(n)) != _unit(m))
    return out


def test_no_import_cycle_between_packages() -> None:
    """aggregator <-> export was such a knot: the web routes imported the FOCUS export, which imported the
    ledger; the export now sits inside the aggregator, below its routes."""
    assert _cycle(package_graph(_graph())) == []


def test_package_cycle_finder_sees_a_knot_the_module_graph_does_not() -> None:
    modules = {"exporter.a.x": {"exporter.b.y"}, "exporter.b.y": set(), "exporter.b.z": {"exporter.a.w"},
               "exporter.a.w": set()}
    assert _cycle(modules) == []
    assert _cycle(package_graph(modules)) == ["exporter.a", "exporter.b", "exporter.a"]


def test_module_names_follow_their_folders() -> None:
    assert _module(PACKAGE / "aggregator" / "ledger" / "store.py") == "exporter.aggregator.ledger.store"
