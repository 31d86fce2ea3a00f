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

from exporter.aggregator.report import build_report
from exporter.model.books import (
    AgentMark,
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityKey,
    CapacityTotalKey,
    CommitmentKey,
    CommitmentTotalKey,
    CounterMark,
    EventCount,
    NamespaceKey,
    NamespaceTotals,
    UsageAmounts,
    UsageKey,
    _Amounts,
)

T = TypeVar("T")
_A = TypeVar("_A", bound=_Amounts)

SCHEMA_VERSION = 3
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
    2: """
    CREATE TABLE unobserved (
        hour INTEGER NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL,
        currency TEXT NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (hour, node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unobserved_totals (
        node TEXT NOT NULL, pool TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL,
        PRIMARY KEY (node, pool, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE agent_urls (node TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE quota_rejection_totals (namespace TEXT PRIMARY KEY, count INTEGER NOT NULL);
    ALTER TABLE quota_events ADD COLUMN seen_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE agents ADD COLUMN since REAL;
    UPDATE quota_events SET seen_at = CAST(strftime('%s', 'now') AS REAL)
    """,
    # Version-2 pricing: a list cost beside every cost (rows booked before it had no discounts, so their
    # list cost is their cost), energy per namespace, commitments' unused part and how far it is booked,
    # and the billing facts of each node (what ``report --reprice`` prices the same GPU-hours by).
    3: """
    ALTER TABLE usage ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE usage SET list_cost = cost;
    ALTER TABLE unallocated ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE unallocated SET list_cost = cost;
    ALTER TABLE unobserved ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE unobserved SET list_cost = cost;
    ALTER TABLE totals ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE totals SET list_cost = cost;
    ALTER TABLE totals ADD COLUMN energy_j REAL NOT NULL DEFAULT 0;
    UPDATE totals SET energy_j = COALESCE((SELECT SUM(u.energy_j) FROM usage u
        WHERE u.namespace = totals.namespace AND u.currency = totals.currency), 0);
    ALTER TABLE unallocated_totals ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE unallocated_totals SET list_cost = cost;
    ALTER TABLE unobserved_totals ADD COLUMN list_cost REAL NOT NULL DEFAULT 0;
    UPDATE unobserved_totals SET list_cost = cost;
    CREATE TABLE unused_commitment (
        hour INTEGER NOT NULL, commitment TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL, list_cost REAL NOT NULL,
        PRIMARY KEY (hour, commitment, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE unused_commitment_totals (
        commitment TEXT NOT NULL, gpu_model TEXT NOT NULL, currency TEXT NOT NULL,
        seconds REAL NOT NULL, cost REAL NOT NULL, list_cost REAL NOT NULL,
        PRIMARY KEY (commitment, gpu_model, currency)
    ) WITHOUT ROWID;
    CREATE TABLE commitment_marks (commitment TEXT PRIMARY KEY, booked_until REAL NOT NULL);
    CREATE TABLE node_billing (node TEXT PRIMARY KEY, instance_type TEXT NOT NULL, capacity_type TEXT NOT NULL)
    """,
}

TableRows = Mapping[Any, _Amounts]  # a NamedTuple key -> amounts


def _accumulate(db: sqlite3.Connection, table: str, keys: tuple[str, ...], rows: TableRows) -> None:
    """Add ``rows`` (key -> amounts) into ``table``: insert new keys, add to existing ones.

    Columns are the key's field names and the amounts' field names: the one place where a named number
    becomes a column."""
    if not rows:
        return
    values = next(iter(rows.values())).columns()
    cols = ", ".join(keys + values)
    marks = ", ".join("?" * (len(keys) + len(values)))
    add = ", ".join(f"{c} = {c} + excluded.{c}" for c in values)
    db.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {add}",
                   [(*k, *v.values()) for k, v in rows.items()])


def _load(db: sqlite3.Connection, table: str, key: type[Any], amounts: type[_A]) -> dict[Any, _A]:
    cols = ", ".join(key._fields + amounts.columns())
    n = len(key._fields)
    return {key(*r[:n]): amounts(*(float(v) for v in r[n:])) for r in db.execute(f"SELECT {cols} FROM {table}")}


class LedgerError(RuntimeError):
    """The ledger file cannot be opened or migrated."""


@dataclass(slots=True)
class NodeCounterMark:
    """One row of the ``hwm`` table: the last booked value of one counter of one node's agent."""

    node: str
    key: str
    mark: CounterMark


@dataclass(slots=True)
class QuotaEvent:
    """A quota-rejection Event's count as last seen (Events repeat with a growing count)."""

    uid: str
    namespace: str
    count: int
    seen_at: float


@dataclass(slots=True)
class TickWrite:
    """Everything one tick writes, in one transaction."""

    usage: dict[UsageKey, UsageAmounts] = field(default_factory=dict)
    unallocated: dict[CapacityKey, CapacityAmounts] = field(default_factory=dict)
    unobserved: dict[CapacityKey, CapacityAmounts] = field(default_factory=dict)
    hwm: list[NodeCounterMark] = field(default_factory=list)
    hwm_reset_nodes: list[str] = field(default_factory=list)
    hwm_deleted: list[tuple[str, str]] = field(default_factory=list)  # (node, counter key)
    agents: dict[str, AgentMark] = field(default_factory=dict)
    agent_urls: dict[str, str] = field(default_factory=dict)  # node -> the URL that proved it
    books_since: dict[str, float] = field(default_factory=dict)  # node -> start of its books (first booking)
    pruned_nodes: list[str] = field(default_factory=list)
    totals: dict[NamespaceKey, NamespaceTotals] = field(default_factory=dict)
    unallocated_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    unobserved_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    quota_events: list[QuotaEvent] = field(default_factory=list)
    breakdown: dict[BreakdownKey, BreakdownTotals] = field(default_factory=dict)
    unused_commitment: dict[CommitmentKey, CapacityAmounts] = field(default_factory=dict)
    unused_commitment_totals: dict[CommitmentTotalKey, CapacityAmounts] = field(default_factory=dict)
    commitment_marks: dict[str, float] = field(default_factory=dict)  # commitment -> booked until
    node_billing: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> (instance type, capacity type)

    def empty(self) -> bool:
        return not (self.usage or self.unallocated or self.unobserved or self.hwm or self.agents or self.agent_urls
                    or self.quota_events or self.hwm_reset_nodes or self.hwm_deleted or self.pruned_nodes
                    or self.commitment_marks or self.node_billing)


@dataclass(slots=True)
class LedgerState:
    """What the aggregator reloads at start."""

    agents: dict[str, AgentMark] = field(default_factory=dict)
    hwm: dict[str, dict[str, CounterMark]] = field(default_factory=dict)
    totals: dict[NamespaceKey, NamespaceTotals] = field(default_factory=dict)
    unallocated_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    unobserved_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    quota_events: dict[str, EventCount] = field(default_factory=dict)  # uid -> (namespace, count)
    quota_rejection_base: dict[str, int] = field(default_factory=dict)  # namespace -> count of pruned events
    breakdown: dict[BreakdownKey, BreakdownTotals] = field(default_factory=dict)
    agent_urls: dict[str, str] = field(default_factory=dict)
    unused_commitment_totals: dict[CommitmentTotalKey, CapacityAmounts] = field(default_factory=dict)
    commitment_marks: dict[str, float] = field(default_factory=dict)
    node_billing: dict[str, tuple[str, str]] = field(default_factory=dict)


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
            found = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(next(iter(found))) if found else 0
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
        st = LedgerState()

        def rows(sql: str) -> list[sqlite3.Row]:
            cur = db.cursor()
            cur.row_factory = sqlite3.Row  # columns by name
            return list(cur.execute(sql))

        st.agents = {r["node"]: AgentMark(r["epoch"], float(r["booked_ts"]), int(r["seq"]))
                     for r in rows("SELECT node, epoch, booked_ts, seq FROM agents")}
        for r in rows(f"SELECT node, key, {', '.join(CounterMark.columns())} FROM hwm"):
            st.hwm.setdefault(r["node"], {})[r["key"]] = CounterMark(
                **{c: float(r[c]) for c in CounterMark.columns()})
        st.totals = _load(db, "totals", NamespaceKey, NamespaceTotals)
        st.unallocated_totals = _load(db, "unallocated_totals", CapacityTotalKey, CapacityAmounts)
        st.unobserved_totals = _load(db, "unobserved_totals", CapacityTotalKey, CapacityAmounts)
        st.breakdown = _load(db, "breakdown_totals", BreakdownKey, BreakdownTotals)
        st.quota_events = {r["uid"]: EventCount(r["namespace"], int(r["count"]))
                           for r in rows("SELECT uid, namespace, count FROM quota_events")}
        st.quota_rejection_base = {r["namespace"]: int(r["count"])
                                   for r in rows("SELECT namespace, count FROM quota_rejection_totals")}
        st.agent_urls = {r["node"]: r["url"] for r in rows("SELECT node, url FROM agent_urls")}
        st.unused_commitment_totals = _load(db, "unused_commitment_totals", CommitmentTotalKey, CapacityAmounts)
        st.commitment_marks = {r["commitment"]: float(r["booked_until"])
                               for r in rows("SELECT commitment, booked_until FROM commitment_marks")}
        st.node_billing = {r["node"]: (r["instance_type"], r["capacity_type"])
                           for r in rows("SELECT node, instance_type, capacity_type FROM node_billing")}
        return st

    async def load_state(self) -> LedgerState:
        return await self._run(self.load_state_sync)

    def _transaction(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one write transaction; any failure rolls the whole of it back."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            out = body(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return out

    def commit_sync(self, w: TickWrite) -> None:
        def body(db: sqlite3.Connection) -> None:
            _accumulate(db, "usage", UsageKey._fields, w.usage)
            _accumulate(db, "unallocated", CapacityKey._fields, w.unallocated)
            _accumulate(db, "unobserved", CapacityKey._fields, w.unobserved)
            for node in w.hwm_reset_nodes:
                db.execute("DELETE FROM hwm WHERE node = ?", (node,))
            if w.hwm_deleted:
                db.executemany("DELETE FROM hwm WHERE node = ? AND key = ?", w.hwm_deleted)
            if w.hwm:
                db.executemany(
                    f"INSERT OR REPLACE INTO hwm (node, key, {', '.join(CounterMark.columns())}) VALUES (?,?,?,?,?,?)",
                    [(m.node, m.key, *m.mark.values()) for m in w.hwm])
            if w.agents:  # ``since``: when the node's books began; set once, kept by later ticks
                db.executemany(
                    "INSERT INTO agents (node, epoch, booked_ts, seq, since) VALUES (?,?,?,?,?) ON CONFLICT (node) "
                    "DO UPDATE SET epoch = excluded.epoch, booked_ts = excluded.booked_ts, seq = excluded.seq",
                    [(node, *mark, w.books_since.get(node, mark.booked_ts)) for node, mark in w.agents.items()])
            if w.agent_urls:
                db.executemany("INSERT OR REPLACE INTO agent_urls (node, url) VALUES (?,?)", list(w.agent_urls.items()))
            for node in w.pruned_nodes:  # a deleted node: its marks and pin go, its booked history stays
                for table in ("agents", "hwm", "agent_urls"):
                    db.execute(f"DELETE FROM {table} WHERE node = ?", (node,))
            _accumulate(db, "totals", NamespaceKey._fields, w.totals)
            _accumulate(db, "unallocated_totals", CapacityTotalKey._fields, w.unallocated_totals)
            _accumulate(db, "unobserved_totals", CapacityTotalKey._fields, w.unobserved_totals)
            _accumulate(db, "breakdown_totals", BreakdownKey._fields, w.breakdown)
            _accumulate(db, "unused_commitment", CommitmentKey._fields, w.unused_commitment)
            _accumulate(db, "unused_commitment_totals", CommitmentTotalKey._fields, w.unused_commitment_totals)
            db.executemany("INSERT OR REPLACE INTO commitment_marks (commitment, booked_until) VALUES (?,?)",
                           list(w.commitment_marks.items()))
            db.executemany("INSERT OR REPLACE INTO node_billing (node, instance_type, capacity_type) VALUES (?,?,?)",
                           [(node, *facts) for node, facts in w.node_billing.items()])
            if w.quota_events:
                db.executemany("INSERT OR REPLACE INTO quota_events (uid, namespace, count, seen_at) VALUES (?,?,?,?)",
                               [(e.uid, e.namespace, e.count, e.seen_at) for e in w.quota_events])

        self._transaction(body)
        self.commits += 1

    async def commit(self, w: TickWrite) -> None:
        await self._run(self.commit_sync, w)

    def compact_sync(self, before_hour: int, *, quota_events_before: float | None = None) -> int:
        """Drop hourly rows older than the retention (totals keep the counters monotonic), and quota
        events not seen since ``quota_events_before`` (their counts move into per-namespace totals, so
        the rejections counter never goes backwards)."""
        def body(db: sqlite3.Connection) -> int:
            n = 0
            for table in ("usage", "unallocated", "unobserved", "unused_commitment"):
                n += db.execute(f"DELETE FROM {table} WHERE hour < ?", (before_hour,)).rowcount
            if quota_events_before is not None:
                db.execute(
                    "INSERT INTO quota_rejection_totals (namespace, count) "
                    "SELECT namespace, SUM(count) FROM quota_events WHERE seen_at < ? GROUP BY namespace "
                    "ON CONFLICT (namespace) DO UPDATE SET count = count + excluded.count", (quota_events_before,))
                n += db.execute("DELETE FROM quota_events WHERE seen_at < ?", (quota_events_before,)).rowcount
            return n

        return self._transaction(body)

    async def compact(self, before_hour: int, *, quota_events_before: float | None = None) -> int:
        return await self._run(lambda: self.compact_sync(before_hour, quota_events_before=quota_events_before))

    async def run_report(self, by: str, since: float | None, until: float | None) -> list[dict[str, Any]]:
        return await self._run(build_report, self.query_sync, by, since, until)

    def query_sync(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        return list(self._db().execute(sql, tuple(params)))

    async def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return await self._run(self.query_sync, sql, params)
