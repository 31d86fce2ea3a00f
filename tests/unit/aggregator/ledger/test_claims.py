"""Schema 7 on both backends: the DRA claim joins the usage key. A ledger an older build wrote (schema 6,
no claim) is migrated on open: its rows keep their amounts with claim "", and rows that differ only by
claim stay apart (the primary key includes it), so ``--by claim`` reports each claim."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.ledger.schema import TABLES_V6
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.model.books import UsageKey
from tests.ledger_versions import back_to, idle_tick, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

HOUR = 1_764_547_200  # 2025-12-01T00:00:00Z
KEY = UsageKey(HOUR, "ml", "p", "wl", "n1", "pool", "M", "", "", "USD")


def _ledger(t: LedgerTarget) -> Ledger:
    return Ledger(t.target, password_file=t.password_file)


def _as_schema_6(t: LedgerTarget) -> None:
    """Put back the usage table as schema 6 made it (no claim column, claim not in the key) with one row:
    1 GPU-h (3600 s) at 4.00, half of it used."""
    stmts = usage_as_of(TABLES_V6, backend=t.backend, hour=HOUR)
    stmts += [
              "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
              "priority_class, currency, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, energy_j, "
              f"list_cost) VALUES ('default', {HOUR}, 'ml', 'p', 'wl', 'n1', 'pool', 'M', '', '', 'USD', "
              "3600, 1800, 0, 1800, 4.0, 2.0, 0, 4.0)",
              *back_to(6, backend=t.backend, usage=False)]
    raw_execute(t, *stmts)


async def test_schema_6_ledger_gains_the_claim_key(ledger_target: LedgerTarget) -> None:
    """After the migration: the old row is claim "" with its 1 GPU-h and 4.00; 900 s more on the same key add
    to it (1.25 GPU-h, 4.00 + 0.25 x 4.00 = 5.00); 1800 s through claim ml/c1 is a row of its own
    (0.5 GPU-h, 0.5 x 4.00 = 2.00)."""
    fresh = _ledger(ledger_target)
    fresh.open_sync()
    fresh.backend.close()
    _as_schema_6(ledger_target)
    ledger = _ledger(ledger_target)
    await ledger.open()
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION == 15
        assert await ledger.query("SELECT claim, allocated_s, cost FROM usage") == [("", 3600.0, 4.0)]
        await ledger.commit(idle_tick(KEY, seconds=900.0, price=4.0))
        await ledger.commit(idle_tick(KEY._replace(claim="ml/c1"), seconds=1800.0, price=4.0))
        rows = {r["claim"]: r for r in await ledger.run_report("claim", since=None, until=None)}
    finally:
        await ledger.close()
    assert set(rows) == {"", "ml/c1"}
    assert rows[""]["namespace"] == rows["ml/c1"]["namespace"] == "ml"
    assert rows[""]["allocated_gpu_hours"] == (3600 + 900) / 3600
    assert rows[""]["cost"] == 4.0 + 900 / 3600 * 4.0
    assert rows["ml/c1"]["allocated_gpu_hours"] == 1800 / 3600
    assert rows["ml/c1"]["cost"] == 1800 / 3600 * 4.0


async def test_fresh_ledger_keys_usage_by_claim(ledger_target: LedgerTarget) -> None:
    """Two pods' time on one shared claim, and the same pod's time through two claims in one hour, stay
    in rows of their own: 3 rows; by claim: ml/shared 2 x 1800 s = 1 GPU-h, ml/other 600 s = 1/6 GPU-h."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    try:
        await ledger.commit(idle_tick(KEY._replace(pod="s1", claim="ml/shared"), seconds=1800.0, price=4.0))
        await ledger.commit(idle_tick(KEY._replace(pod="s2", claim="ml/shared"), seconds=1800.0, price=4.0))
        await ledger.commit(idle_tick(KEY._replace(pod="s1", claim="ml/other"), seconds=600.0, price=4.0))
        assert await ledger.query("SELECT COUNT(*) FROM usage") == [(3,)]
        rows = {r["claim"]: r for r in await ledger.run_report("claim", since=None, until=None)}
    finally:
        await ledger.close()
    assert rows["ml/shared"]["allocated_gpu_hours"] == 2 * 1800 / 3600
    assert rows["ml/shared"]["cost"] == 2 * 1800 / 3600 * 4.0
    assert rows["ml/other"]["allocated_gpu_hours"] == Decimal("0.166666667")  # 600 / 3600 = 0.1666666666|7
