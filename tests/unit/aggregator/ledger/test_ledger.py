"""The ledger on both backends (SQLite and a real PostgreSQL server): one transaction per tick, atomic
on failure, compaction that keeps the totals."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg
import pytest

from exporter.aggregator.ledger.store import (
    SCHEMA_VERSION,
    Ledger,
    LedgerError,
    LedgerState,
    NodeCounterMark,
    QuotaEvent,
    TickWrite,
)
from exporter.model.books import (
    AgentMark,
    CounterMark,
    NamespaceKey,
    NamespaceTotals,
    UsageAmounts,
    UsageKey,
)
from exporter.model.exact import exact
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute
from tests.unit.aggregator.books.pricing_books import version_2_ledger

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

DB_ERRORS = (sqlite3.Error, psycopg.Error)


def _ledger(t: LedgerTarget) -> Ledger:
    return Ledger(t.target, password_file=t.password_file)


def _write(hour: int, seconds: float) -> TickWrite:
    w = TickWrite()
    w.usage[UsageKey(hour, "ns", "p", "wl", "n1", "pool", "M", "", "", "USD")] = UsageAmounts(
        allocated_s=exact(seconds), used_s=exact(seconds / 2), unmeasured_s=exact(0.0), idle_s=exact(seconds / 2),
            cost=exact(1.0), idle_cost=exact(0.5),
        energy_j=exact(0.0))
    w.totals[NamespaceKey("ns", "USD")] = NamespaceTotals(allocated_s=exact(seconds), used_s=exact(seconds / 2),
        unmeasured_s=exact(0.0),
                                                          cost=exact(1.0), idle_cost=exact(0.5))
    w.hwm.append(NodeCounterMark("n1", "ns/p/c/GPU-1", CounterMark(allocated_s=seconds, used_s=seconds / 2,
                                                                   unmeasured_s=0.0, energy_j=0.0)))
    w.agents["n1"] = AgentMark("e1", float(hour), 1)
    return w


async def test_commit_compact_and_reload(ledger_target: LedgerTarget) -> None:
    """Two ticks in different hours; compaction drops the old hourly row but the running totals (what
    the counters are restored from) keep both, and the high-water marks survive a reopen."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    await ledger.commit(_write(3600, 100.0))
    await ledger.commit(_write(7200 * 10, 50.0))
    assert await ledger.compact(before_hour=7200) == 1
    rows = await ledger.query("SELECT hour, allocated_s FROM usage")
    assert rows == [(72000, 50.0)]
    state = await ledger.load_state()
    assert state.totals[NamespaceKey("ns", "USD")].allocated_s == pytest.approx(150.0)
    assert state.hwm["n1"]["ns/p/c/GPU-1"].allocated_s == 50.0
    await ledger.close()
    reopened = _ledger(ledger_target)
    await reopened.open()
    assert (await reopened.load_state()).agents == {"n1": ("e1", 72000.0, 1)}
    await reopened.close()


async def test_failed_transaction_leaves_nothing(ledger_target: LedgerTarget) -> None:
    """A statement failing mid-transaction rolls back the whole tick: no rows, totals or marks."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    bad = _write(3600, 100.0)
    bad.agent_urls["n2"] = None  # type: ignore[assignment]  # NOT NULL: fails after the usage inserts
    with pytest.raises(DB_ERRORS):
        await ledger.commit(bad)
    assert await ledger.query("SELECT COUNT(*) FROM usage") == [(0,)]
    state = await ledger.load_state()
    assert state.totals == {} and state.hwm == {} and state.agents == {}
    await ledger.close()


async def test_newer_schema_is_refused(ledger_target: LedgerTarget) -> None:
    """A ledger written by a newer build is not touched."""
    raw_execute(ledger_target, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION + 1}')")
    ledger = _ledger(ledger_target)
    with pytest.raises(LedgerError, match="newer than this build"):
        await ledger.open()
    raw_execute(ledger_target, "SELECT 1 FROM meta")  # untouched: no ledger table was created
    with pytest.raises(DB_ERRORS):
        raw_execute(ledger_target, "SELECT 1 FROM usage")
    await ledger.close()


async def test_failed_compaction_rolls_back_and_the_ledger_keeps_working(ledger_target: LedgerTarget) -> None:
    """A DELETE failing inside compaction used to leave the transaction open, so every later BEGIN
    IMMEDIATE failed. Now it rolls back: nothing is deleted and the next tick commits."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    await ledger.commit(_write(3600, 100.0))
    if ledger_target.backend == "sqlite":
        raw_execute(ledger_target, "CREATE TRIGGER no_delete BEFORE DELETE ON unallocated "
                    "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    else:
        raw_execute(ledger_target, "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'refused'; END $$",
                    "CREATE TRIGGER no_delete BEFORE DELETE ON unallocated FOR EACH ROW EXECUTE FUNCTION refuse()")
    raw_execute(ledger_target, "INSERT INTO unallocated (cluster, hour, node, pool, gpu_model, currency, seconds, "
                "cost, list_cost) VALUES ('default', 0, 'n1', 'p', 'M', 'USD', 1.0, 1.0, 1.0)")
    with pytest.raises(DB_ERRORS):
        await ledger.compact(before_hour=7200)
    assert await ledger.query("SELECT COUNT(*) FROM usage") == [(1,)]  # the usage DELETE was rolled back
    await ledger.commit(_write(7200, 10.0))  # no transaction left open
    assert await ledger.query("SELECT COUNT(*) FROM usage") == [(2,)]
    await ledger.close()


async def test_pruned_node_loses_marks_and_pin_but_keeps_history(ledger_target: LedgerTarget) -> None:
    ledger = _ledger(ledger_target)
    await ledger.open()
    w = _write(3600, 100.0)
    w.agent_urls["n1"] = "http://10.0.0.1:9500"
    await ledger.commit(w)
    prune = TickWrite()
    prune.pruned_nodes.append("n1")
    await ledger.commit(prune)
    state = await ledger.load_state()
    assert state.agents == {} and state.hwm == {} and state.agent_urls == {}
    assert await ledger.query("SELECT COUNT(*) FROM usage") == [(1,)]
    assert state.totals[NamespaceKey("ns", "USD")].allocated_s == 100.0
    await ledger.close()


async def test_old_quota_events_fold_into_totals(ledger_target: LedgerTarget) -> None:
    """Events not seen for the retention are deleted, their counts kept per namespace (7 + 2 = 9)."""
    ledger = _ledger(ledger_target)
    await ledger.open()
    w = TickWrite()
    w.quota_events += [QuotaEvent("old", "team-a", 7, 100.0), QuotaEvent("new", "team-a", 2, 5000.0)]
    await ledger.commit(w)
    assert await ledger.compact(before_hour=0, quota_events_before=1000.0) == 1
    state = await ledger.load_state()
    assert state.quota_events == {"new": ("team-a", 2)} and state.quota_rejection_base == {"team-a": 7}
    await ledger.close()


async def test_version_1_ledger_is_migrated(tmp_path: Path) -> None:
    """A SQLite ledger written by schema 1 opens: the new tables exist, old quota events get a seen time,
    and existing rows belong to the cluster ``default`` (PostgreSQL ledgers begin at schema 3)."""
    from exporter.aggregator.ledger.store import MIGRATIONS

    path = tmp_path / "l.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for stmt in filter(None, (x.strip() for x in MIGRATIONS[1].split(";"))):
        conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO quota_events VALUES ('u1', 'ns', 3)")
    conn.close()
    ledger = Ledger(path)
    await ledger.open()
    assert await ledger.query("SELECT COUNT(*) FROM unobserved") == [(0,)]
    (seen,) = await ledger.query("SELECT seen_at FROM quota_events")
    assert seen[0] > 1.7e9
    assert await ledger.query("SELECT cluster, uid, count FROM quota_events") == [("default", "u1", 3)]
    assert (await ledger.load_state()).quota_events == {"u1": ("ns", 3)}
    await ledger.close()


def test_version_2_ledger_migrates_with_list_cost_equal_to_cost(tmp_path: Path) -> None:
    """A ledger written at schema version 2 (before clusters and list prices) opens at the current version:
    every booked row's list cost is its cost, and each namespace's energy total is the energy of its kept rows."""
    path = tmp_path / "v2.db"
    conn = version_2_ledger(path)
    conn.execute("INSERT INTO usage VALUES (3600, 'ns', 'p', 'wl', 'n1', 'pool', 'M', '', '', 'USD', "
                 "3600, 1800, 0, 1800, 4.0, 2.0, 500.0)")
    conn.execute("INSERT INTO unallocated VALUES (3600, 'n1', 'pool', 'M', 'USD', 7200, 8.0)")
    conn.execute("INSERT INTO unobserved VALUES (3600, 'n1', 'pool', 'M', 'USD', 60, 0.5)")
    conn.execute("INSERT INTO totals VALUES ('ns', 'USD', 3600, 1800, 0, 4.0, 2.0)")
    conn.execute("INSERT INTO unallocated_totals VALUES ('n1', 'pool', 'M', 'USD', 7200, 8.0)")
    conn.close()
    ledger = Ledger(path)

    async def reopen() -> LedgerState:
        await ledger.open()
        try:
            return await ledger.load_state()
        finally:
            await ledger.close()

    state = asyncio.run(reopen())
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    # stored as integer nano-units since schema 13: 4.0 = 4 x 10^9
    assert db.execute("SELECT cost, list_cost FROM usage").fetchall() == [(4_000_000_000, 4_000_000_000)]
    assert db.execute("SELECT cost, list_cost FROM unallocated").fetchall() == [(8_000_000_000, 8_000_000_000)]
    assert db.execute("SELECT cost, list_cost FROM unobserved").fetchall() == [(500_000_000, 500_000_000)]
    db.close()
    assert state.totals[NamespaceKey("ns", "USD")].list_cost == 4.0
    assert state.totals[NamespaceKey("ns", "USD")].energy_j == 500.0
    assert next(iter(state.unallocated_totals.values())).list_cost == 8.0
    assert state.commitment_marks == {} and state.node_billing == {}
