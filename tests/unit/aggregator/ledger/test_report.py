"""report on a ledger an older build wrote: read-only, it says to migrate, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.aggregator.ledger.store import SCHEMA_VERSION
from tests.unit.aggregator.books.pricing_books import version_2_ledger


def test_report_on_an_unmigrated_ledger_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` opens the ledger read-only: on a version-2 ledger it says to migrate it, exit 2."""
    from exporter.cli import main

    path = tmp_path / "v2.db"
    conn = version_2_ledger(path)
    conn.close()
    assert main(["report", "--ledger", str(path)]) == 2
    assert f"schema version 2 is older than this build's ({SCHEMA_VERSION})" in capsys.readouterr().err
