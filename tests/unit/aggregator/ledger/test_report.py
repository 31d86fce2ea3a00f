"""report on a ledger an older build wrote: read-only, it says to migrate, exit 2."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from exporter.aggregator.ledger.report import render
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


def test_a_table_shows_what_nobody_knows_as_unknown() -> None:
    """CO2e nobody measured is None in JSON and "unknown" in the table, never "None" nor 0; amounts round to 4
    digits for display (1.25 -> 1.2500, 1234.5 -> 1,234.5000)."""
    text = render([{"namespace": "ml", "cost": Decimal("1.25"), "co2e_kg": None},
                   {"namespace": "web", "cost": Decimal("1234.5"), "co2e_kg": Decimal("0.384")}], "table")
    lines = text.splitlines()
    assert lines[1].split() == ["ml", "1.2500", "unknown"]
    assert lines[2].split() == ["web", "1,234.5000", "0.3840"]
