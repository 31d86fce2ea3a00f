"""The code stays ruff- and mypy-clean (strict), tests and tools included."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

PATHS = ["exporter", "tests", "bench", "alerts", "dashboards", "fuzz", "tools", "scripts"]


@pytest.mark.timeout(180)  # ruff over the whole tree
def test_ruff() -> None:
    """`ruff check` finds nothing."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed (dev extra)")
    proc = subprocess.run([ruff, "check", *PATHS], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.timeout(900)  # a cold mypy over the whole tree (a fresh clone has no cache)
def test_mypy_strict() -> None:
    """`mypy --strict` (pyproject settings) finds nothing."""
    pytest.importorskip("mypy", reason="mypy not installed (dev extra)")
    proc = subprocess.run([sys.executable, "-m", "mypy", *PATHS], cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
