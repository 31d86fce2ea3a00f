"""Schema 10 on both backends: how the GPU was shared joins the usage key. A ledger the previous build wrote
(schema 9, no sharing) is migrated on open: its rows keep their amounts with sharing "", and rows that differ
only by sharing stay apart (the primary key includes it), so ``--by sharing`` reports each mode."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.ledger.schema import TABLES_V9
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.model.books import UsageKey
from tests.ledger_versions import back_to, idle_tick, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

HOUR = 1_764_547_200  # 2025-12-01T00:00:00Z
KEY = UsageKey(HOUR, "ml", "p", "wl", "n1", "pool", "M", "", "", "USD")


def _ledger(t: LedgerTarget) -> Ledger:
    return Ledger(t.target, password_file=t.password_file)


def _as_schema_9(t: LedgerTarget) -> None:
    """Put back the usage table as schema 9 made it (claim last in the key, no sharing) with one row:
    1 GPU-h (3600 s) at 4.00, half of it used, through claim ml/c1."""
    stmts = usage_as_of(TABLES_V9, backend=t.backend, hour=HOUR)
    stmts += [
              "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
              "priority_class, currency, claim, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, "
              f"energy_j, list_cost) VALUES ('default', {HOUR}, 'ml', 'p', 'wl', 'n1', 'pool', 'M', '', '', 'USD', "
              "'ml/c1', 3600, 1800, 0, 1800, 4.0, 2.0, 0, 4.0)",
              *back_to(9, backend=t.backend, usage=False)]
    raw_execute(t, *stmts)


async def test_schema_9_ledger_gains_the_sharing_key(ledger_target: LedgerTarget) -> None:
    """After the migration: the old row is sharing "" with its claim, 1 GPU-h and 4.00; 900 s more on the
    same key add to it (1.25 GPU-h, 4.00 + 0.25 x 4.00 = 5.00); 1800 s of the same holder booked as dra is a
    row of its own (0.5 GPU-h, 0.5 x 4.00 = 2.00)."""
    fresh = _ledger(ledger_target)
    fresh.open_sync()
    fresh.backend.close()
    _as_schema_9(ledger_target)
    ledger = _ledger(ledger_target)
    await ledger.open()
    old = KEY._replace(claim="ml/c1")
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION == 15
        assert await ledger.query("SELECT claim, sharing, allocated_s, cost FROM usage") == [
            ("ml/c1", "", 3600.0, 4.0)]
        await ledger.commit(idle_tick(old, seconds=900.0, price=4.0))
        await ledger.commit(idle_tick(old._replace(sharing="dra"), seconds=1800.0, price=4.0))
        assert await ledger.query("SELECT COUNT(*) FROM usage") == [(2,)]
        rows = {r["sharing"]: r for r in await ledger.run_report("sharing", since=None, until=None)}
    finally:
        await ledger.close()
    assert set(rows) == {"", "dra"}
    assert rows[""]["allocated_gpu_hours"] == (3600 + 900) / 3600
    assert rows[""]["cost"] == 4.0 + 900 / 3600 * 4.0
    assert rows["dra"]["allocated_gpu_hours"] == 1800 / 3600
    assert rows["dra"]["cost"] == 1800 / 3600 * 4.0


async def test_fresh_ledger_keys_usage_by_sharing(ledger_target: LedgerTarget) -> None:
    """One pod's time in one hour under two modes (its node's GPUs turned from time-slicing to MPS) stays in
    two rows: time-slicing 1800 s = 0.5 GPU-h (2.00), mps 600 s = 1/6 GPU-h (600 / 3600 x 4.00)."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    try:
        await ledger.commit(idle_tick(KEY._replace(sharing="time-slicing"), seconds=1800.0, price=4.0))
        await ledger.commit(idle_tick(KEY._replace(sharing="mps"), seconds=600.0, price=4.0))
        assert await ledger.query("SELECT COUNT(*) FROM usage") == [(2,)]
        rows = {r["sharing"]: r for r in await ledger.run_report("sharing", since=None, until=None)}
    finally:
        await ledger.close()
    assert rows["time-slicing"]["allocated_gpu_hours"] == 1800 / 3600
    assert rows["time-slicing"]["cost"] == 1800 / 3600 * 4.0
    assert rows["mps"]["allocated_gpu_hours"] == Decimal("0.166666667")  # 600 / 3600 = 0.1666666666|7
    assert rows["mps"]["cost"] == Decimal("0.666666667")  # 600 / 3600 x 4.00 = 0.6666666666|7, both backends
