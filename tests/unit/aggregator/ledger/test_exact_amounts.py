"""Exact amounts in the ledger (schema 13): booked once, summed exactly, the same bytes on both backends;
a schema-12 ledger migrates half-even without moving a total by more than its rows' rounding; SQLite refuses
to overflow into a float."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from exporter.aggregator.books.priced_rows import add, usage_amounts
from exporter.aggregator.books.rates import slices
from exporter.aggregator.ledger.report import build_report, render
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger, LedgerError, TickWrite
from exporter.model.books import CounterMark, NamespaceKey, NamespaceTotals, UsageKey
from exporter.model.pricing.labels import CapacityType
from exporter.model.pricing.resolve import GpuRate, PriceSource
from tests.ledger_versions import back_to
from tests.pg import LedgerTarget, PgServer, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

START = 1_764_547_200  # 2025-12-01T00:00:00Z
RATE = GpuRate(list_per_gpu_hour=24.0, effective_per_gpu_hour=24.0, source=PriceSource.MODEL,
               capacity_type=CapacityType.ON_DEMAND, known=True)


async def _book_a_week(target: str, password_file: Path | None) -> tuple[list[tuple[object, ...]], str]:
    """7 days x 5760 ticks of 15 s on one GPU at 24.00/h: 15 / 3600 x 24 = 0.1 per tick, booked through the
    booking path's own arithmetic, one commit per day."""
    ledger = Ledger(target, password_file=password_file)
    await ledger.open()
    try:
        for day in range(7):
            w = TickWrite()
            for tick in range(5760):
                t = START + day * 86400 + tick * 15
                parts = slices(t, t + 15)
                (amount,) = usage_amounts(CounterMark(allocated_s=15.0), parts=parts, rates=[RATE])
                assert amount.cost == Decimal("0.1")
                add(w.usage, UsageKey(parts[0].hour, "ml", "p", "wl", "n1", "pool", "M", "", "", "USD"),
                    amount=amount)
                add(w.totals, NamespaceKey("ml", "USD"),
                    amount=NamespaceTotals(allocated_s=amount.allocated_s, cost=amount.cost))
            await ledger.commit(w)
        sums = await ledger.query("SELECT SUM(cost), SUM(allocated_s), SUM(idle_s) FROM usage")
        state = await ledger.load_state()
        rows = await ledger.read(lambda q: build_report(q, "namespace", since=None, until=None))
    finally:
        await ledger.close()
    total = state.totals[NamespaceKey("ml", "USD")]
    return [*sums, (total.cost, total.allocated_s)], render(rows, "json")


async def test_a_week_of_ticks_sums_exactly_and_alike_on_both_backends(postgres: PgServer, tmp_path: Path) -> None:
    # 40320 ticks x 0.1 = 4032.0; 40320 x 15 s = 604800 s = 168 GPU-h, all idle (nothing used)
    lite = await _book_a_week(str(tmp_path / "l.db"), None)
    pg = await _book_a_week(postgres.database(), postgres.password_file)
    want = Decimal("4032.000000000")
    assert lite[0][0] == (want, Decimal("604800.000000000"), Decimal("604800.000000000"))
    assert lite[0][1] == (want, Decimal("604800.000000000"))
    assert '"cost": 4032.000000000' in lite[1] and '"allocated_gpu_hours": 168.000000000' in lite[1]
    assert pg == lite  # the same values
    assert [tuple(str(v) for v in r) for r in pg[0]] == [tuple(str(v) for v in r) for r in lite[0]]
    assert pg[1] == lite[1]  # the same bytes


#: Schema-12 rows as today's build wrote them: floats with binary noise and more than 9 digits.
_OLD = [  # (pod, allocated_s, cost, energy_j)
    ("a", 0.1 + 0.2, 0.30000000000000004, 1234.56789),
    ("b", 1800.0000000015, 1.0000000015, 0.0005),   # 10th digits: ties (after the shortest repr) go to even
    ("c", 1800.0000000025, 2.0000000025, 0.0015),
]


def _schema_12(t: LedgerTarget) -> None:
    stmts = back_to(12, backend=t.backend)
    if t.backend == "postgres":
        stmts.append(f"CREATE TABLE usage_p202512 PARTITION OF usage FOR VALUES FROM ({START}) TO (1767225600)")
    for pod, alloc, cost, joules in _OLD:
        stmts.append(
            "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
            "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, "
            f"energy_j, list_cost) VALUES ('default', {START}, 'ml', '{pod}', 'wl', 'n1', 'pool', 'M', '', '', "
            f"'USD', '', '', {alloc!r}, 0, 0, {alloc!r}, {cost!r}, {cost!r}, {joules!r}, {cost!r})")
    stmts.append("INSERT INTO totals (cluster, namespace, currency, allocated_s, used_s, unmeasured_s, cost, "
                 f"idle_cost, list_cost, energy_j) VALUES ('default', 'ml', 'USD', {sum(r[1] for r in _OLD)!r}, 0, 0,"
                 f" {sum(r[2] for r in _OLD)!r}, 0, 0, {sum(r[3] for r in _OLD)!r})")
    raw_execute(t, *stmts)


async def test_a_schema_12_ledger_migrates_half_even_within_each_rows_rounding(ledger_target: LedgerTarget) -> None:
    fresh = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    fresh.open_sync()
    fresh.backend.close()
    _schema_12(ledger_target)
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        rows = await ledger.query("SELECT pod, allocated_s, cost, energy_j FROM usage ORDER BY pod")
        state = await ledger.load_state()
    finally:
        await ledger.close()
    # a: 0.30000000000000004 -> 0.300000000; 1234.56789 J -> 1234.568 (3 digits)
    # b: 1800.0000000015 -> ...001|5: a tie, 1 is odd -> 1800.000000002; 1.0000000015 -> 1.000000002; 0.0005 -> 0.000
    # c: 1800.0000000025 -> ...002|5: a tie, 2 is even -> 1800.000000002; 2.0000000025 -> 2.000000002; 0.0015 -> 0.002
    assert rows == [("a", Decimal("0.300000000"), Decimal("0.300000000"), Decimal("1234.568")),
                    ("b", Decimal("1800.000000002"), Decimal("1.000000002"), Decimal("0.000")),
                    ("c", Decimal("1800.000000002"), Decimal("2.000000002"), Decimal("0.002"))]
    # every total moves by at most half a unit per row it sums (3 rows: 1.5e-9 money, 1.5e-3 J)
    total = state.totals[NamespaceKey("ml", "USD")]
    old_cost = sum(Decimal(repr(r[2])) for r in _OLD)  # 3.3000000040 exactly (as written)
    assert abs(total.cost - old_cost) <= Decimal("1.5e-9")
    assert abs(sum(r[2] for r in rows) - old_cost) <= Decimal("1.5e-9")  # the rows' sum: 3.300000004
    assert sum(r[2] for r in rows) == Decimal("3.300000004")
    assert abs(total.energy_j - sum(Decimal(repr(r[3])) for r in _OLD)) <= Decimal("1.5e-3")


async def test_ties_round_half_even_on_both_backends(ledger_target: LedgerTarget) -> None:
    """Money NUMERIC on PostgreSQL (exact ties), REAL on SQLite (ties by the shortest repr): 0.0000000005 -> 0,
    0.0000000015 -> 0.000000002, 0.0000000025 -> 0.000000002, 0.0000000035 -> 0.000000004."""
    fresh = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    fresh.open_sync()
    fresh.backend.close()
    ties = ["0.0000000005", "0.0000000015", "0.0000000025", "0.0000000035"]
    raw_execute(ledger_target, *back_to(12, backend=ledger_target.backend), *(
        "INSERT INTO breakdown_totals (cluster, namespace, pool, priority_class, currency, allocated_s, cost) "
        f"VALUES ('default', 'ns{i}', 'p', '', 'USD', 0, {v})" for i, v in enumerate(ties)))
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        got = await ledger.query("SELECT cost FROM breakdown_totals ORDER BY namespace")
    finally:
        await ledger.close()
    assert [c for (c,) in got] == [Decimal("0E-9"), Decimal("0.000000002"), Decimal("0.000000002"),
                                   Decimal("0.000000004")]


async def test_sqlite_refuses_a_total_past_int64_instead_of_storing_a_float(tmp_path: Path) -> None:
    """9,223,372,036.854775807 units of 1e-9 is int64's limit (2.56 M GPU-hours of seconds): a total pushed past
    it fails the tick's transaction by name and leaves the books as they were."""
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    await ledger.open()
    key = NamespaceKey("ml", "USD")
    near = TickWrite(totals={key: NamespaceTotals(allocated_s=Decimal("9223372036.000000000"))})
    await ledger.commit(near)
    with pytest.raises(sqlite3.IntegrityError, match="allocated_s_exceeds_sqlite_range"):
        await ledger.commit(TickWrite(totals={key: NamespaceTotals(allocated_s=Decimal("1.000000000"))}))
    with pytest.raises(LedgerError, match="cost = 9999999999 exceeds a SQLite ledger's range"):
        await ledger.commit(TickWrite(totals={key: NamespaceTotals(cost=Decimal("9999999999"))}))
    state = await ledger.load_state()
    await ledger.close()
    assert state.totals[key].allocated_s == Decimal("9223372036.000000000")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT typeof(allocated_s) FROM totals").fetchall() == [("integer",)]
    conn.close()
