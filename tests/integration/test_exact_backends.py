"""Exact amounts across the whole path, on random fleets: agents' counters booked by the real ``Books`` into a
SQLite ledger and a real PostgreSQL one, then exported as FOCUS by the CLI from each.

For every seed: both exports are the same bytes; every money and quantity value has at most 9 fractional
digits and no exponent; ``ListCost = ListUnitPrice x PricingQuantity`` and ``ContractedCost =
ContractedUnitPrice x PricingQuantity`` to the 9th digit (half-even) on every row; and Σ ``EffectiveCost`` is
the ledger's booked total (usage, capacity nobody held, capacity nobody observed) exactly.
"""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import sys
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path

import pytest

from tests.integration.random_fleet import SEEDS, book_fleet, random_fleet, random_pricing
from tests.pg import PgServer, postgres_fixture
from tests.unit.aggregator.focus.focus_helpers import read_csv

_FIXTURES = (postgres_fixture,)  # used by name
REPO = Path(__file__).resolve().parents[2]
AMOUNT = re.compile(r"^-?\d+(\.\d{1,9})?$")
NANO = Decimal("1e-9")
MONEY_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingQuantity", "ConsumedQuantity",
                 "ListUnitPrice", "ContractedUnitPrice", "x_IdleCost", "x_AllocatedGpuSeconds", "x_UsedGpuSeconds")
GOLDEN = REPO / "tests" / "fixtures" / "focus"


def _export(*ledger: str) -> str:
    """The CLI's CSV decoded from its bytes (text mode would turn a CR LF into LF and hide it)."""
    done = subprocess.run([sys.executable, "-m", "exporter", "export", "--ledger", *ledger, "--format", "focus-csv",
                           "--all"], cwd=REPO, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _times(price: Decimal, quantity: Decimal) -> Decimal:
    """What a checker computes: the exact product, rounded half-even to 9 digits."""
    with localcontext(prec=80):
        return (price * quantity).quantize(NANO, rounding=ROUND_HALF_EVEN)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_fleets_book_and_export_exactly_alike_on_both_backends(seed: int, postgres: PgServer,
                                                                      tmp_path: Path) -> None:
    rng = random.Random(seed)
    fleet, pricing = random_fleet(rng), random_pricing(rng)
    sqlite_path = str(tmp_path / "ledger.db")
    url = postgres.database()
    sqlite_total = asyncio.run(book_fleet(sqlite_path, None, fleet=fleet, pricing=pricing))
    pg_total = asyncio.run(book_fleet(url, postgres.password_file, fleet=fleet, pricing=pricing))
    assert sqlite_total == pg_total  # the same books, to the last digit
    from_sqlite = _export(sqlite_path)
    assert _export(url, "--ledger-password-file", str(postgres.password_file)) == from_sqlite
    assert from_sqlite == (GOLDEN / f"random_fleet_{seed}.csv").read_bytes().decode()  # 6faadc8's exporter's bytes
    rows = read_csv(from_sqlite)
    assert rows
    for row in rows:
        for column in MONEY_COLUMNS:
            value = row.get(column) or ""
            assert value == "" or AMOUNT.match(value), (column, value)  # ≤ 9 digits, no exponent
        qty = Decimal(row["PricingQuantity"])
        assert Decimal(row["ListCost"]) == _times(Decimal(row["ListUnitPrice"]), qty), row
        assert Decimal(row["ContractedCost"]) == _times(Decimal(row["ContractedUnitPrice"]), qty), row
    assert sum((Decimal(r["EffectiveCost"]) for r in rows), Decimal(0)) == sqlite_total
