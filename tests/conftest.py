"""Shared fixtures: paths, scenario writers and a structlog reset."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

REPO = Path(__file__).resolve().parents[1]
#: Real DCGM Exporter captures, each with its source in SOURCES.md next to it.
DCGM_FIXTURES = REPO / "tests" / "fixtures" / "dcgm"


@pytest.fixture(autouse=True)
def _reset_structlog() -> None:
    structlog.reset_defaults()


@pytest.fixture(name="write_scenario")
def _write_scenario(tmp_path: Path) -> Callable[[str], Path]:
    """Write a scenario YAML (dedented) into the test's temp dir and return its path."""

    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
