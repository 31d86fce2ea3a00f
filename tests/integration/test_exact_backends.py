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

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import Ledger
from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot
from tests.pg import PgServer, postgres_fixture
from tests.unit.aggregator.focus.focus_helpers import read_csv

_FIXTURES = (postgres_fixture,)  # used by name
REPO = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0  # an hour boundary
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
FRACTIONS = {"": Decimal(1), "1g.10gb": Decimal(1) / 7, "3g.40gb": Decimal(3) / 7, "2g.20gb": Decimal(2) / 7}
AMOUNT = re.compile(r"^-?\d+(\.\d{1,9})?$")
NANO = Decimal("1e-9")
MONEY_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingQuantity", "ConsumedQuantity",
                 "ListUnitPrice", "ContractedUnitPrice", "x_IdleCost", "x_AllocatedGpuSeconds", "x_UsedGpuSeconds")


def _pricing(rng: random.Random) -> Pricing:
    """Prices with many digits (9 after the point), so nothing is round by luck."""
    h100, a100 = (Decimal(rng.randrange(1_000_000_000, 9_999_999_999)) / 10**9 for _ in range(2))
    return parse_pricing(f'currency: USD\ndefault_price: 1\nmodels: {{"{H100}": {h100}, "{A100}": {a100}}}\n',
                         "p.yaml")


def _fleet(rng: random.Random) -> list[list[UsageSnapshot]]:
    """Per node, its agent's snapshots: holders of whole GPUs or MIG slices whose counters advance by random
    amounts (never more than wall time x fraction) over random intervals crossing hours, plus unheld GPU time."""
    out = []
    for n in range(rng.randint(1, 3)):
        node, model = f"n{n}", rng.choice((H100, A100))
        holders = []
        for i in range(rng.randint(1, 4)):
            profile = rng.choice(tuple(FRACTIONS)) if model == A100 else ""
            holders.append((f"ns{rng.randint(0, 2)}", f"p{n}-{i}", profile, float(FRACTIONS[profile])))
        counters = {pod: [0.0, 0.0] for _ns, pod, _p, _f in holders}
        free, ts, snaps = 0.0, T0, []
        for seq in range(1, rng.randint(3, 7)):
            step = rng.choice((15.0, 60.0, 333.3, 900.0, 2_700.0))
            ts += step
            for _ns, pod, _profile, frac in holders:
                held = step * frac * rng.random()
                counters[pod][0] += held
                counters[pod][1] += held * rng.random()
            free += step * rng.random()
            snaps.append(UsageSnapshot(node=node, epoch="e1", timestamp=ts, seq=seq, started_at=T0, holders=[
                HolderCounters(namespace=ns, pod=pod, container="c", device_id=f"{pod}-dev", gpu_uuid=f"GPU-{node}-{i}",
                               gpu_model=model, mig_profile=profile or None, fraction=frac,
                               allocated_s=counters[pod][0], used_s=counters[pod][1], unmeasured_s=0.0)
                for i, (ns, pod, profile, frac) in enumerate(holders)],
                unallocated=[UnallocatedCounter(gpu_model=model, seconds=free)],
                capacity=[GpuCapacity(gpu_uuid=f"GPU-{node}-{i}", gpu_model=model) for i in range(8)]))
        out.append(snaps)
    return out


async def _book(target: str, password_file: Path | None, *, fleet: list[list[UsageSnapshot]],
                pricing: Pricing) -> Decimal:
    """Book the fleet tick by tick (every node's next snapshot in one tick); the ledger's booked total."""
    ledger = Ledger(target, password_file=password_file)
    await ledger.open()
    try:
        books, kube = Books(await ledger.load_state()), KubeState()
        for node in {s[0].node for s in fleet}:
            kube.nodes[node] = {}
        for tick in range(max(len(s) for s in fleet)):
            p = books.prepare([s[tick] for s in fleet if tick < len(s)], kube, pricing=pricing)
            assert p.rejected == {}
            await ledger.commit(p.write)
            books.apply(p)
        total = Decimal(0)
        for table in ("usage", "unallocated", "unobserved"):
            ((cost,),) = await ledger.query(f"SELECT COALESCE(SUM(cost), 0) FROM {table}")
            total += Decimal(cost)
        return total
    finally:
        await ledger.close()


def _export(*ledger: str) -> str:
    done = subprocess.run([sys.executable, "-m", "exporter", "export", "--ledger", *ledger, "--format", "focus-csv",
                           "--all"], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _times(price: Decimal, quantity: Decimal) -> Decimal:
    """What a checker computes: the exact product, rounded half-even to 9 digits."""
    with localcontext(prec=80):
        return (price * quantity).quantize(NANO, rounding=ROUND_HALF_EVEN)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(6))
def test_random_fleets_book_and_export_exactly_alike_on_both_backends(seed: int, postgres: PgServer,
                                                                      tmp_path: Path) -> None:
    rng = random.Random(seed)
    fleet, pricing = _fleet(rng), _pricing(rng)
    sqlite_path = str(tmp_path / "ledger.db")
    url = postgres.database()
    sqlite_total = asyncio.run(_book(sqlite_path, None, fleet=fleet, pricing=pricing))
    pg_total = asyncio.run(_book(url, postgres.password_file, fleet=fleet, pricing=pricing))
    assert sqlite_total == pg_total  # the same books, to the last digit
    from_sqlite = _export(sqlite_path)
    assert _export(url, "--ledger-password-file", str(postgres.password_file)) == from_sqlite
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
