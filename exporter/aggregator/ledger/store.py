"""The durable ledger: one transaction per tick, on SQLite (a file) or PostgreSQL (a URL).

Usage rows, unallocated capacity, running totals and every agent's high-water marks are written in
the same transaction, so a crash between any two statements neither loses nor repeats a GPU-second:
either the tick's deltas and the marks they were computed against both land, or neither does. Every row
carries the cluster it belongs to, so many clusters can share one PostgreSQL database; replicas of one
cluster sharing it are fenced by a term checked inside each tick's transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from exporter.aggregator.ledger.backend import Backend, LedgerError, StaleTerm, Tx, is_postgres
from exporter.aggregator.ledger.devices import write_devices
from exporter.aggregator.ledger.evidence import write_evidence
from exporter.aggregator.ledger.faults import LedgerHealth
from exporter.aggregator.ledger.nodes import (
    NodeBooks,
    StaleMarks,
    check_marks,
    load_fleet,
    load_nodes,
    read_marks,
    write_fleet,
)
from exporter.aggregator.ledger.postgres import PostgresBackend, postgres_reader, redact
from exporter.aggregator.ledger.report import Query, ReportRequest, report_rows
from exporter.aggregator.ledger.rows import FleetFacts, LedgerState, NodeCounterMark, QuotaEvent, TickWrite
from exporter.aggregator.ledger.schema import DEFAULT_CLUSTER, SCHEMA_VERSION
from exporter.aggregator.ledger.schema_v1 import SQLITE_MIGRATIONS
from exporter.aggregator.ledger.sql import accumulate as _accumulate
from exporter.aggregator.ledger.sql import load_table as _load
from exporter.aggregator.ledger.sqlite import SqliteBackend, sqlite_reader
from exporter.aggregator.ledger.teams import write_teams
from exporter.aggregator.ledger.verify import mark_compacted, refuse_failing
from exporter.logs import get_logger
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
    NodeKey,
    UnmeasuredEnergy,
    UsageKey,
    _Amounts,
)

log = get_logger("aggregator")

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Ledger", "LedgerError", "LedgerState", "NodeBooks", "NodeCounterMark",
           "QuotaEvent", "StaleMarks", "StaleTerm", "TickWrite", "open_reader", "redact"]

T = TypeVar("T")
_A = TypeVar("_A", bound=_Amounts)
MIGRATIONS = SQLITE_MIGRATIONS

def make_backend(target: str | Path, *, password_file: Path | None = None) -> Backend:
    """A path is a SQLite file; a ``postgresql://`` URL is a PostgreSQL database."""
    text = str(target)
    if is_postgres(text):
        return PostgresBackend(text, password_file=password_file)
    return SqliteBackend(Path(text))


def open_reader(target: str | Path, *, password_file: Path | None = None) -> AbstractContextManager[Query]:
    """A read-only query function over a ledger, for ``report`` (no migration, no writes)."""
    text = str(target)
    if is_postgres(text):
        return postgres_reader(text, password_file=password_file)
    return sqlite_reader(Path(text))


class Ledger:
    """Owns one backend on one worker thread; every call goes through ``_run`` (off the event loop)."""

    def __init__(self, target: str | Path, *, cluster: str = DEFAULT_CLUSTER, password_file: Path | None = None,
                 fenced: bool = False, fence_key: str | None = None, guard_marks: bool = False) -> None:
        self.backend = make_backend(target, password_file=password_file)
        self.cluster = cluster
        self.fenced = fenced  # replicas share this ledger: a commit needs the current term
        self.fence_key = fence_key or cluster  # the ``fence`` row: the cluster's, or one shard's of it
        self.guard_marks = guard_marks  # other aggregators book this cluster too: check marks before writing
        self.term: int | None = None
        self.health = LedgerHealth()  # up, or why not (``faults``)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self.commits = 0

    @property
    def may_book(self) -> bool:
        """Whether this replica may commit: always on its own ledger, with the current term on a shared one."""
        return not self.fenced or self.term is not None

    @property
    def path(self) -> str:
        """Where the ledger is, fit for a log line (no password)."""
        return self.backend.describe()

    @property
    def up(self) -> bool:
        """Open and taking writes (``gpucost_ledger_up``): while not, no tick is booked, no agent acknowledged."""
        return self.health.up

    # -- plumbing ------------------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any, write: bool = False) -> T:
        loop = asyncio.get_running_loop()
        try:
            out = await loop.run_in_executor(self._pool, fn, *args)
        except (StaleTerm, StaleMarks, LedgerError):
            raise
        except Exception as exc:
            self.health.failed(exc, write=write, where=self.path)
            raise
        self.health.succeeded(write=write, where=self.path)
        return out

    # -- lifecycle -----------------------------------------------------------------------------------
    def open_sync(self) -> None:
        """Open (and migrate) the database, on the calling thread."""
        self.backend.open()  # then its marks checked: books restored from inconsistent ones lose or repeat seconds
        refuse_failing(self.query_sync, postgres=isinstance(self.backend, PostgresBackend), where=self.path,
                       cluster=self.cluster, close=self.backend.close)
        self.health.opened = True

    async def open(self) -> None:
        """Open (and migrate) the database on the ledger's thread."""
        await self._run(self.open_sync)

    async def close(self) -> None:
        """Close the database, then the ledger's thread."""
        await self._run(self.backend.close)
        self._pool.shutdown(wait=True)

    # -- fencing -------------------------------------------------------------------------------------
    def acquire_term_sync(self, holder: str) -> int:
        """Take the next fencing term for this cluster: every older holder's next commit is refused."""
        def body(tx: Tx) -> int:
            term = (self._current_term(tx) or 0) + 1
            tx.execute("INSERT INTO fence (cluster, term, holder) VALUES (?, ?, ?) ON CONFLICT (cluster) "
                       "DO UPDATE SET term = excluded.term, holder = excluded.holder", (self.fence_key, term, holder))
            return term

        self.term = self.backend.transaction(body)
        return self.term

    async def acquire_term(self, holder: str) -> int:
        """``acquire_term_sync`` on the ledger's thread."""
        return await self._run(self.acquire_term_sync, holder, write=True)

    def _current_term(self, tx: Tx) -> int | None:
        """This cluster's (or shard's) fencing term, the row locked until the transaction ends."""
        for (term,) in tx.fetch(f"SELECT term FROM fence WHERE cluster = ?{self.backend.for_update}",
                                (self.fence_key,)):
            return int(term)
        return None

    def _check_term(self, tx: Tx) -> None:
        if not self.fenced:
            return
        current = self._current_term(tx)
        if self.term is None or current != self.term:
            held, self.term = self.term, None  # deposed: nothing more is booked until a new term is taken
            raise StaleTerm(f"{self.fence_key}: ledger term is {current}, this replica held {held}")

    def _check_marks(self, tx: Tx, expected: Mapping[str, AgentMark | None]) -> None:
        if self.guard_marks:
            check_marks(tx, expected, cluster=self.cluster, for_update=self.backend.for_update)

    def load_nodes_sync(self, nodes: Iterable[str]) -> NodeBooks:
        """The committed marks, pins and billing facts of ``nodes`` (the rest of the books stay as loaded)."""
        wanted = sorted(set(nodes))
        return self.backend.transaction(lambda tx: load_nodes(tx, wanted, cluster=self.cluster))

    async def load_fleet(self) -> dict[str, FleetFacts]:
        """The cluster's nodes and their GPUs, as whichever aggregator booked each last wrote them."""
        return await self._run(self.backend.transaction, lambda tx: load_fleet(tx, cluster=self.cluster))

    async def load_nodes(self, nodes: Iterable[str]) -> NodeBooks:
        """``load_nodes_sync`` on the ledger's thread (a shard's newly owned nodes)."""
        return await self._run(self.load_nodes_sync, list(nodes))

    # -- state ---------------------------------------------------------------------------------------
    def load_state_sync(self) -> LedgerState:
        """What the aggregator restores at start: this cluster's marks, totals, pins and quota events, in one
        transaction."""
        return self.backend.transaction(self._load_state)

    def _load_state(self, tx: Tx) -> LedgerState:
        c = (self.cluster,)
        st = LedgerState()
        st.agents, st.hwm = read_marks(tx, "cluster = ?", params=c)
        st.totals = _load(tx, "totals", key=NamespaceKey, amounts=NamespaceTotals, cluster=self.cluster)
        st.unallocated_totals = _load(tx, "unallocated_totals", key=CapacityTotalKey,
                                      amounts=CapacityAmounts, cluster=self.cluster)
        st.unobserved_totals = _load(tx, "unobserved_totals", key=CapacityTotalKey,
                                     amounts=CapacityAmounts, cluster=self.cluster)
        st.breakdown = _load(tx, "breakdown_totals", key=BreakdownKey, amounts=BreakdownTotals, cluster=self.cluster)
        st.quota_events = {uid: EventCount(ns, int(n)) for uid, ns, n in
                           tx.fetch("SELECT uid, namespace, count FROM quota_events WHERE cluster = ?", c)}
        st.quota_rejection_base = {ns: int(n) for ns, n in
                                   tx.fetch("SELECT namespace, count FROM quota_rejection_totals WHERE cluster = ?", c)}
        st.agent_urls = dict(tx.fetch("SELECT node, url FROM agent_urls WHERE cluster = ?", c))
        st.unused_commitment_totals = _load(tx, "unused_commitment_totals", key=CommitmentTotalKey,
                                            amounts=CapacityAmounts, cluster=self.cluster)
        st.commitment_marks = {name: float(until) for name, until in
                               tx.fetch("SELECT commitment, booked_until FROM commitment_marks WHERE cluster = ?", c)}
        st.node_billing = {node: (itype, ctype) for node, itype, ctype in tx.fetch(
            "SELECT node, instance_type, capacity_type FROM node_billing WHERE cluster = ?", c)}
        st.unmeasured_energy = _load(tx, "unmeasured_energy_totals", key=NodeKey, amounts=UnmeasuredEnergy,
                                     cluster=self.cluster)
        return st

    async def load_state(self) -> LedgerState:
        """``load_state_sync`` on the ledger's thread."""
        return await self._run(self.load_state_sync)

    def commit_sync(self, w: TickWrite, expected: Mapping[str, AgentMark | None] | None = None) -> None:
        """Write one tick; ``expected``: each booked node's mark the deltas were computed against."""
        self.backend.ensure_usage_partitions(k.hour for k in w.usage)
        self.backend.transaction(lambda tx: self._write(tx, w, expected=expected or {}))
        self.commits += 1

    def _write(self, tx: Tx, w: TickWrite, *, expected: Mapping[str, AgentMark | None]) -> None:
        cl = self.cluster
        self._check_term(tx)
        self._check_marks(tx, expected)
        _accumulate(tx, "usage", keys=UsageKey._fields, rows=w.usage, cluster=cl)
        _accumulate(tx, "unallocated", keys=CapacityKey._fields, rows=w.unallocated, cluster=cl)
        _accumulate(tx, "unobserved", keys=CapacityKey._fields, rows=w.unobserved, cluster=cl)
        write_evidence(tx, w.evidence, cluster=cl)
        write_devices(tx, w.node_devices, cluster=cl)
        for node in w.hwm_reset_nodes:
            tx.execute("DELETE FROM hwm WHERE cluster = ? AND node = ?", (cl, node))
        if w.hwm_deleted:
            tx.executemany("DELETE FROM hwm WHERE cluster = ? AND node = ? AND key = ?",
                           [(cl, node, key) for node, key in w.hwm_deleted])
        if w.hwm:
            names = CounterMark.columns()
            marks = ", ".join("?" * (3 + len(names)))
            tx.executemany(
                f"INSERT INTO hwm (cluster, node, key, {', '.join(names)}) VALUES ({marks}) "
                f"ON CONFLICT (cluster, node, key) DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}",
                ((cl, m.node, m.key, *m.mark.values()) for m in w.hwm))
        if w.agents:  # ``since``: when the node's books began; set once, kept by later ticks
            tx.executemany(
                "INSERT INTO agents (cluster, node, epoch, booked_ts, seq, since) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT (cluster, node) "
                "DO UPDATE SET epoch = excluded.epoch, booked_ts = excluded.booked_ts, seq = excluded.seq",
                [(cl, node, mark.epoch, mark.booked_ts, mark.seq, w.books_since.get(node, mark.booked_ts))
                 for node, mark in w.agents.items()])
        if w.agent_urls:
            tx.executemany("INSERT INTO agent_urls (cluster, node, url) VALUES (?,?,?) "
                           "ON CONFLICT (cluster, node) DO UPDATE SET url = excluded.url",
                           [(cl, node, url) for node, url in w.agent_urls.items()])
        for node in w.pruned_nodes:  # a deleted node: its marks and pin go, its booked history stays
            for table in ("agents", "hwm", "agent_urls"):
                tx.execute(f"DELETE FROM {table} WHERE cluster = ? AND node = ?", (cl, node))
        write_fleet(tx, w.fleet, pruned=w.pruned_nodes, cluster=cl)
        _accumulate(tx, "totals", keys=NamespaceKey._fields, rows=w.totals, cluster=cl)
        _accumulate(tx, "unallocated_totals", keys=CapacityTotalKey._fields, rows=w.unallocated_totals, cluster=cl)
        _accumulate(tx, "unobserved_totals", keys=CapacityTotalKey._fields, rows=w.unobserved_totals, cluster=cl)
        _accumulate(tx, "breakdown_totals", keys=BreakdownKey._fields, rows=w.breakdown, cluster=cl)
        _accumulate(tx, "unused_commitment", keys=CommitmentKey._fields, rows=w.unused_commitment, cluster=cl)
        _accumulate(tx, "unused_commitment_totals", keys=CommitmentTotalKey._fields, rows=w.unused_commitment_totals,
                    cluster=cl)
        _accumulate(tx, "unmeasured_energy_totals", keys=NodeKey._fields, rows=w.unmeasured_energy, cluster=cl)
        if w.commitment_marks:  # how far each commitment's unused part is booked: in the same transaction
            tx.executemany("INSERT INTO commitment_marks (cluster, commitment, booked_until) VALUES (?,?,?) "
                           "ON CONFLICT (cluster, commitment) DO UPDATE SET booked_until = excluded.booked_until",
                           [(cl, name, until) for name, until in w.commitment_marks.items()])
        if w.node_billing:
            tx.executemany("INSERT INTO node_billing (cluster, node, instance_type, capacity_type) VALUES (?,?,?,?) "
                           "ON CONFLICT (cluster, node) DO UPDATE SET instance_type = excluded.instance_type, "
                           "capacity_type = excluded.capacity_type",
                           [(cl, node, *facts) for node, facts in w.node_billing.items()])
        write_teams(tx, w.namespace_teams, cluster=cl)
        if w.quota_events:
            tx.executemany("INSERT INTO quota_events (cluster, uid, namespace, count, seen_at) VALUES (?,?,?,?,?) "
                           "ON CONFLICT (cluster, uid) DO UPDATE SET namespace = excluded.namespace, "
                           "count = excluded.count, seen_at = excluded.seen_at",
                           [(cl, e.uid, e.namespace, e.count, e.seen_at) for e in w.quota_events])

    async def commit(self, w: TickWrite, expected: Mapping[str, AgentMark | None] | None = None) -> None:
        """Write one tick on the ledger's thread."""
        await self._run(self.commit_sync, w, expected, write=True)

    async def read(self, fn: Callable[[Query], T]) -> T:
        """Run a read-only ``fn(query)`` on the ledger's thread (off the event loop)."""
        return await self._run(lambda: fn(self.query_sync))

    def compact_sync(self, before_hour: int, *, quota_events_before: float | None = None) -> int:
        """Drop hourly rows older than the retention (totals keep the counters monotonic), and quota
        events not seen since ``quota_events_before`` (their counts move into per-namespace totals, so
        the rejections counter never goes backwards)."""
        cl = self.cluster

        def body(tx: Tx) -> int:
            self._check_term(tx)
            n = self.backend.drop_usage_before(tx, hour=before_hour, cluster=cl)
            for table in ("unallocated", "unobserved", "unused_commitment", "evidence", "namespace_team",
                          "node_devices"):
                n += tx.execute(f"DELETE FROM {table} WHERE cluster = ? AND hour < ?", (cl, before_hour))
            if n:  # totals now hold more than their hour rows: ``ledger verify`` checks them knowing it
                mark_compacted(tx, cluster=cl, before_hour=before_hour)
            if quota_events_before is not None:
                tx.execute(
                    "INSERT INTO quota_rejection_totals (cluster, namespace, count) "
                    "SELECT cluster, namespace, SUM(count) FROM quota_events WHERE cluster = ? AND seen_at < ? "
                    "GROUP BY cluster, namespace ON CONFLICT (cluster, namespace) "
                    "DO UPDATE SET count = quota_rejection_totals.count + excluded.count", (cl, quota_events_before))
                n += tx.execute("DELETE FROM quota_events WHERE cluster = ? AND seen_at < ?", (cl, quota_events_before))
            return n

        return self.backend.transaction(body)

    async def compact(self, before_hour: int, *, quota_events_before: float | None = None) -> int:
        """``compact_sync`` on the ledger's thread: rows removed."""
        return await self._run(lambda: self.compact_sync(before_hour, quota_events_before=quota_events_before),
                               write=True)

    async def run_report(self, by: str, *, since: float | None, until: float | None,
                         cluster: str | None = "") -> list[dict[str, Any]]:
        """Rows of ``by`` (comma-separated keys); ``cluster`` "" = this ledger's cluster, None = all."""
        req = ReportRequest.parse(by, since=since, until=until, cluster=self.cluster if cluster == "" else cluster)
        return await self._run(report_rows, self.query_sync, req)

    def query_sync(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        """One read-only query, in a transaction of its own: the ``Query`` reports and advice are given."""
        return self.backend.transaction(lambda tx: tx.fetch(sql, list(params)))

    async def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """``query_sync`` on the ledger's thread."""
        return await self._run(self.query_sync, sql, params)

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """One write (not the books': a budget's hold), in a transaction of its own; rows changed."""
        return await self._run(self.backend.transaction, lambda tx: tx.execute(sql, list(params)), write=True)
