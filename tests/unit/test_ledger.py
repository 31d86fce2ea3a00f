"""The SQLite ledger: one transaction per tick, atomic on failure, compaction that keeps the totals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from exporter.aggregator.ledger import SCHEMA_VERSION, Ledger, LedgerError, TickWrite

KEY = (3600, "ns", "p", "wl", "n1", "pool", "M", "", "", "USD")


def _write(hour: int, seconds: float) -> TickWrite:
    w = TickWrite()
    w.usage[(hour, *KEY[1:])] = [seconds, seconds / 2, 0.0, seconds / 2, 1.0, 0.5, 0.0]
    w.totals[("ns", "USD")] = [seconds, seconds / 2, 0.0, 1.0, 0.5]
    w.hwm.append(("n1", "ns/p/c/GPU-1", seconds, seconds / 2, 0.0, 0.0))
    w.agents.append(("n1", "e1", float(hour), 1))
    return w


async def test_commit_compact_and_reload(tmp_path: Path) -> None:
    """Two ticks in different hours; compaction drops the old hourly row but the running totals (what
    the counters are restored from) keep both, and the high-water marks survive a reopen."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    await ledger.commit(_write(3600, 100.0))
    await ledger.commit(_write(7200 * 10, 50.0))
    assert await ledger.compact(before_hour=7200) == 1
    rows = await ledger.query("SELECT hour, allocated_s FROM usage")
    assert rows == [(72000, 50.0)]
    state = await ledger.load_state()
    assert state.totals[("ns", "USD")][0] == pytest.approx(150.0)
    assert state.hwm["n1"]["ns/p/c/GPU-1"][0] == 50.0
    await ledger.close()
    reopened = Ledger(tmp_path / "l.db")
    await reopened.open()
    assert (await reopened.load_state()).agents == {"n1": ("e1", 72000.0, 1)}
    await reopened.close()


async def test_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    """A statement failing mid-transaction rolls back the whole tick: no rows, totals or marks."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    bad = _write(3600, 100.0)
    bad.agents.append(("n2",))  # type: ignore[arg-type]  # wrong arity: fails after the usage insert
    with pytest.raises(sqlite3.ProgrammingError):
        await ledger.commit(bad)
    assert await ledger.query("SELECT COUNT(*) FROM usage") == [(0,)]
    state = await ledger.load_state()
    assert state.totals == {} and state.hwm == {} and state.agents == {}
    await ledger.close()


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A ledger written by a newer build is not touched."""
    path = tmp_path / "l.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    ledger = Ledger(path)
    with pytest.raises(LedgerError, match="newer than this build"):
        await ledger.open()
    await ledger.close()
