"""``gpu-cost-exporter --version`` reports the installed package's version, which pyproject.toml sets."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version

import pytest

from exporter.cli import main
from tests.conftest import REPO


def _pyproject_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_version_flag_prints_the_package_metadata_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version exits 0 with `gpu-cost-exporter <version>`, the version in the installed metadata and in
    pyproject.toml (one place to bump)."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpu-cost-exporter {version('gpu-cost-exporter')}"
    assert version("gpu-cost-exporter") == _pyproject_version()


def test_version_flag_from_the_command_line() -> None:
    """The entry point as users run it (`python -m exporter --version`) prints the same line."""
    proc = subprocess.run([sys.executable, "-m", "exporter", "--version"], capture_output=True, text=True,
                          check=False, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"gpu-cost-exporter {_pyproject_version()}"
