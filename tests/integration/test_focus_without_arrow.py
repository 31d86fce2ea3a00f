"""An install without pyarrow (the base install, the image): ``export`` writes the same FOCUS CSV bytes row by
row with the standard library, and refuses Parquet with one line saying what to install. Real processes of
``python -m exporter`` in which importing pyarrow fails, as it does where it is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.focus_golden import FIXTURES, ledger_from_sql

#: The CLI with pyarrow unimportable (``sys.modules[name] = None`` makes ``import name`` raise ImportError).
WITHOUT_ARROW = ("import sys; sys.modules['pyarrow'] = None; from exporter.cli import main; "
                 "raise SystemExit(main(sys.argv[1:]))")


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Output as bytes: text mode would turn a stray CR LF into LF and hide it."""
    return subprocess.run([sys.executable, "-c", WITHOUT_ARROW, *args], cwd=REPO, capture_output=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ledger_from_sql((FIXTURES / "default_scenario.sql").read_text(),
                           tmp_path_factory.mktemp("no-arrow") / "ledger.db")


def test_csv_without_pyarrow_is_the_golden_bytes(ledger: Path) -> None:
    done = cli("export", "--ledger", str(ledger), "--format", "focus-csv", "--all", "--output", "-")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == (FIXTURES / "default_scenario.csv").read_bytes()
    assert b"pyarrow" not in done.stderr


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.parquet"
    done = cli("export", "--ledger", str(ledger), "--format", "focus-parquet", "--all", "--output", str(out))
    assert done.returncode == 2
    assert done.stderr.decode().strip().splitlines() == [
        "gpu-cost-exporter: error: --format focus-parquet needs pyarrow: pip install 'gpu-cost-exporter[focus]'"]
    assert not out.exists()
