"""The FOCUS CSV of the default scenario's ledger is, byte for byte, what the row-by-row exporter of
6faadc8 wrote for it (``tests/fixtures/focus``, made by ``tests/integration/focus_golden.py``): the columnar
exporter changed how rows are computed and written, not one character of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.focus_golden import FIXTURES, export_csv, ledger_from_sql


@pytest.fixture(scope="module")
def default_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ledger_from_sql((FIXTURES / "default_scenario.sql").read_text(),
                           tmp_path_factory.mktemp("golden") / "ledger.db")


@pytest.mark.parametrize(("version", "name"), [("1.3", "default_scenario.csv"), ("1.2", "default_scenario_1.2.csv")])
def test_default_scenario_export_is_the_golden_bytes(default_ledger: Path, version: str, name: str) -> None:
    assert export_csv(str(default_ledger), version=version) == (FIXTURES / name).read_bytes().decode()
