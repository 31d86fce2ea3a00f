"""The durable ledger: SQLite in WAL mode, one writer thread, one transaction per tick.

Usage rows, unallocated capacity, running totals and every agent's high-water marks are written in
the same transaction, so a crash between any two statements neither loses nor repeats a GPU-second:
either the tick's deltas and the marks they were computed against both land, or neither does.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SCHEMA_VERSION = 1
MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE usage (
        hour INTEGER NOT NULL, namespace TEXT NOT NULL, pod TEXT NOT NULL, workload TEXT NOT NULL,
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, mig_profile TEXT NOT NULL,
        priority_class TEXT NOT NULL, currency TEXT NOT NULL,
        allocated_s REAL NOT NULL, used_s REAL NOT NULL, unmeasured_s REAL NOT NULL, idle_s REAL NOT NULL,
        cost REAL NOT NULL, idle_cost REAL NOT NULL, energy_j REAL NOT NULL,
        PRIMARY KEY (hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, priority_class, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unallocated (
        hour INTEGER NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL,
        currency TEXT NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (hour, node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE hwm (
        node TEXT NOT NULL, key TEXT NOT NULL, allocated_s REAL NOT NULL, used_s REAL NOT NULL,
        unmeasured_s REAL NOT NULL, energy_j REAL NOT NULL, PRIMARY KEY (node, key)
    ) WITHOUT ROWID;
    CREATE TABLE agents (node TEXT PRIMARY KEY, epoch TEXT NOT NULL, booked_ts REAL NOT NULL, seq INTEGER NOT NULL);
    CREATE TABLE totals (
        namespace TEXT NOT NULL, currency TEXT NOT NULL, allocated_s REAL NOT NULL, used_s REAL NOT NULL,
        unmeasured_s REAL NOT NULL, cost REAL NOT NULL, idle_cost REAL NOT NULL,
        PRIMARY KEY (namespace, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unallocated_totals (
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE quota_events (uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, count INTEGER NOT NULL);
    CREATE TABLE breakdown_totals (
        namespace TEXT NOT NULL, pool TEXT NOT NULL, priority_class TEXT NOT NULL, currency TEXT NOT NULL,
        allocated_s REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (namespace, pool, priority_class, currency)
    ) WITHOUT ROWID;
    CREATE INDEX usage_namespace ON usage (namespace, hour);
    """,
}

USAGE_KEY = ("hour", "namespace", "pod", "workload", "node", "pool", "gpu_model", "mig_profile", "priority_class",
             "currency")
USAGE_VALUES = ("allocated_s", "used_s", "unmeasured_s", "idle_s", "cost", "idle_cost", "energy_j")


def _accumulate(db: sqlite3.Connection, table: str, keys: tuple[str, ...], values: tuple[str, ...],
                rows: Mapping[tuple[Any, ...], list[float]]) -> None:
    """Add ``rows`` (key tuple -> values) into ``table``: insert new keys, add to existing ones."""
    if not rows:
        return
    cols = ", ".join(keys + values)
    marks = ", ".join("?" * (len(keys) + len(values)))
    add = ", ".join(f"{c} = {c} + excluded.{c}" for c in values)
    db.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {add}",
                   [(*k, *v) for k, v in rows.items()])


class LedgerError(RuntimeError):
    """The ledger file cannot be opened or migrated."""


@dataclass(slots=True)
class TickWrite:
    """Everything one tick writes, in one transaction."""

    usage: dict[tuple[Any, ...], list[float]] = field(default_factory=dict)  # USAGE_KEY -> USAGE_VALUES
    unallocated: dict[tuple[int, str, str, str, str], list[float]] = field(default_factory=dict)  # -> [s, cost]
    hwm: list[tuple[str, str, float, float, float, float]] = field(default_factory=list)
    hwm_reset_nodes: list[str] = field(default_factory=list)
    hwm_deleted: list[tuple[str, str]] = field(default_factory=list)
    agents: list[tuple[str, str, float, int]] = field(default_factory=list)
    totals: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (ns, cur) -> 5 values
    unallocated_totals: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)  # -> [s, cost]
    quota_events: list[tuple[str, str, int]] = field(default_factory=list)
    breakdown: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)  # -> [alloc_s, cost]

    def empty(self) -> bool:
        return not (self.usage or self.unallocated or self.hwm or self.agents or self.quota_events
                    or self.hwm_reset_nodes or self.hwm_deleted)


@dataclass(slots=True)
class LedgerState:
    """What the aggregator reloads at start."""

    agents: dict[str, tuple[str, float, int]]
    hwm: dict[str, dict[str, tuple[float, float, float, float]]]
    totals: dict[tuple[str, str], list[float]]
    unallocated_totals: dict[tuple[str, str, str, str], list[float]]
    quota_events: dict[str, tuple[str, int]]
    breakdown: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)


class Ledger:
    """Owns one SQLite connection on one worker thread; every call goes through ``_run``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._conn: sqlite3.Connection | None = None
        self.commits = 0

    # -- plumbing ------------------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError("ledger is not open")
        return self._conn

    # -- lifecycle -----------------------------------------------------------------------------------
    def open_sync(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise LedgerError(f"{self.path}: schema version {version} is newer than this build ({SCHEMA_VERSION})")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                conn.execute("BEGIN IMMEDIATE")
                for stmt in filter(None, (s.strip() for s in MIGRATIONS[v].split(";"))):
                    conn.execute(stmt)
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v),))
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path}: {exc}") from exc
        self._conn = conn

    async def open(self) -> None:
        await self._run(self.open_sync)

    async def close(self) -> None:
        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        await self._run(_close)
        self._pool.shutdown(wait=True)

    # -- state ---------------------------------------------------------------------------------------
    def load_state_sync(self) -> LedgerState:
        db = self._db()
        agents = {r[0]: (r[1], float(r[2]), int(r[3]))
                  for r in db.execute("SELECT node, epoch, booked_ts, seq FROM agents")}
        hwm: dict[str, dict[str, tuple[float, float, float, float]]] = {}
        for node, key, a, u, m, e in db.execute(
                "SELECT node, key, allocated_s, used_s, unmeasured_s, energy_j FROM hwm"):
            hwm.setdefault(node, {})[key] = (a, u, m, e)
        totals = {(r[0], r[1]): list(r[2:]) for r in db.execute(
            "SELECT namespace, currency, allocated_s, used_s, unmeasured_s, cost, idle_cost FROM totals")}
        unalloc = {(r[0], r[1], r[2], r[3]): [float(r[4]), float(r[5])] for r in db.execute(
            "SELECT node, pool, gpu_model, currency, seconds, cost FROM unallocated_totals")}
        quota = {r[0]: (r[1], int(r[2])) for r in db.execute("SELECT uid, namespace, count FROM quota_events")}
        breakdown = {(r[0], r[1], r[2], r[3]): [float(r[4]), float(r[5])] for r in db.execute(
            "SELECT namespace, pool, priority_class, currency, allocated_s, cost FROM breakdown_totals")}
        return LedgerState(agents, hwm, totals, unalloc, quota, breakdown)

    async def load_state(self) -> LedgerState:
        return await self._run(self.load_state_sync)

    def commit_sync(self, w: TickWrite) -> None:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            _accumulate(db, "usage", USAGE_KEY, USAGE_VALUES, w.usage)
            _accumulate(db, "unallocated", ("hour", "node", "pool", "gpu_model", "currency"), ("seconds", "cost"),
                        w.unallocated)
            for node in w.hwm_reset_nodes:
                db.execute("DELETE FROM hwm WHERE node = ?", (node,))
            if w.hwm_deleted:
                db.executemany("DELETE FROM hwm WHERE node = ? AND key = ?", w.hwm_deleted)
            if w.hwm:
                db.executemany(
                    "INSERT OR REPLACE INTO hwm (node, key, allocated_s, used_s, unmeasured_s, energy_j) "
                    "VALUES (?,?,?,?,?,?)", w.hwm)
            if w.agents:
                db.executemany("INSERT OR REPLACE INTO agents (node, epoch, booked_ts, seq) VALUES (?,?,?,?)",
                               w.agents)
            _accumulate(db, "totals", ("namespace", "currency"),
                        ("allocated_s", "used_s", "unmeasured_s", "cost", "idle_cost"), w.totals)
            _accumulate(db, "unallocated_totals", ("node", "pool", "gpu_model", "currency"), ("seconds", "cost"),
                        w.unallocated_totals)
            _accumulate(db, "breakdown_totals", ("namespace", "pool", "priority_class", "currency"),
                        ("allocated_s", "cost"), w.breakdown)
            if w.quota_events:
                db.executemany("INSERT OR REPLACE INTO quota_events (uid, namespace, count) VALUES (?,?,?)",
                               w.quota_events)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.commits += 1

    async def commit(self, w: TickWrite) -> None:
        await self._run(self.commit_sync, w)

    def compact_sync(self, before_hour: int) -> int:
        """Drop hourly rows older than the retention (totals keep the counters monotonic)."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        n = db.execute("DELETE FROM usage WHERE hour < ?", (before_hour,)).rowcount
        n += db.execute("DELETE FROM unallocated WHERE hour < ?", (before_hour,)).rowcount
        db.execute("COMMIT")
        return n

    async def compact(self, before_hour: int) -> int:
        return await self._run(self.compact_sync, before_hour)

    async def run_report(self, by: str, since: float | None, until: float | None) -> list[dict[str, Any]]:
        from exporter.aggregator.report import build_report

        return await self._run(build_report, self.query_sync, by, since, until)

    def query_sync(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        return list(self._db().execute(sql, tuple(params)))

    async def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return await self._run(self.query_sync, sql, params)
