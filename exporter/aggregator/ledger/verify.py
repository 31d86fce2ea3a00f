"""Whether a ledger is consistent, as finance can check it: ``gpu-cost-exporter ledger verify``.

Four checks, each finding one line ``<check>: <where>: <what>``:

* ``integrity``: the database's own check (SQLite ``PRAGMA integrity_check``; PostgreSQL ``amcheck``'s
  ``bt_index_check`` on every index of the ledger's tables, where the extension is installed);
* ``total``: every running total equals the sum of its hour rows, exactly (amounts are fixed-point). Hour rows
  past the retention are dropped by compaction while totals keep them: on a compacted cluster a total may only
  be larger than its rows' sum;
* ``conservation``: per node and hour, allocated + unallocated + unobserved GPU-seconds equal the node's GPUs
  (as last booked) x the seconds of that hour between the start of the node's books and its last booked
  snapshot, and no hour in between is missing;
* ``mark``: each node's marks agree with its rows: books that start before they end, counter marks only for
  nodes with books, no row after a node's last booked snapshot, no commitment booked past its mark.

``cheap`` checks only what reads the small tables (the marks): what the aggregator runs at every start.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from exporter.aggregator.ledger.backend import LedgerError, Tx
from exporter.aggregator.ledger.report import Query
from exporter.aggregator.ledger.schema import BY_NAME, FIXED_WORDS
from exporter.model.books import HOUR, hour_of

#: Running totals and the hour rows they sum: (totals table, hourly table, key columns they share).
TOTALS = (
    ("totals", "usage", ("namespace", "currency")),
    ("breakdown_totals", "usage", ("namespace", "pool", "priority_class", "currency")),
    ("unallocated_totals", "unallocated", ("node", "pool", "gpu_model", "currency")),
    ("unobserved_totals", "unobserved", ("node", "pool", "gpu_model", "currency")),
    ("unused_commitment_totals", "unused_commitment", ("commitment", "gpu_model", "currency")),
)
#: Node-hour capacity: (hourly table, its GPU-seconds column).
CAPACITY = (("usage", "allocated_s"), ("unallocated", "seconds"), ("unobserved", "seconds"))
#: GPU-seconds a node-hour may be off by: each booked row rounds to 9 digits, the agents' counters are floats.
SECONDS_TOLERANCE = 1e-5
COMPACTED = "compacted_before/"  # meta key prefix: hour rows of the cluster before this hour were dropped


@dataclass(frozen=True, slots=True)
class Finding:
    """One inconsistency, printed as one line."""

    check: str
    where: str
    what: str

    def line(self) -> str:
        """``<check>: <where>: <what>``."""
        return f"{self.check}: {self.where}: {self.what}"


def verify(query: Query, *, postgres: bool, cheap: bool = False, cluster: str | None = None) -> list[Finding]:
    """Every finding of the ledger ``query`` reads (``cluster``'s, else all), integrity first; ``cheap``: the
    marks only."""
    out: list[Finding] = []
    if not cheap:
        out += integrity(query, postgres=postgres)
        if out:
            return out  # a damaged database answers the other checks with nonsense
    tables = ("agents", "hwm") if cheap else ("agents", "hwm", "usage", "totals", "unallocated", "unobserved")
    clusters = [cluster] if cluster is not None else sorted({c for t in tables for (c,) in query(
        f"SELECT DISTINCT cluster FROM {t}", ())})
    for name in clusters:
        out += marks(query, cluster=name, rows=not cheap)
    if cheap:
        return out
    for name in clusters:
        out += totals(query, cluster=name)
        out += conservation(query, cluster=name)
    return out


def refuse_failing(query: Query, *, postgres: bool, where: str, cluster: str, close: Callable[[], None]) -> None:
    """``LedgerError`` naming the first finding of the cheap checks of ``cluster`` (the aggregator's start), after
    ``close``."""
    findings = verify(query, postgres=postgres, cheap=True, cluster=cluster)
    if findings:
        close()
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise LedgerError(f"{where}: fails verification: {findings[0].line()}{more}; see "
                          "`gpu-cost-exporter ledger verify`")


def integrity(query: Query, *, postgres: bool) -> list[Finding]:
    """The database's own consistency check."""
    if not postgres:
        try:
            found = [str(msg) for (msg,) in query("PRAGMA integrity_check", ())]
        except sqlite3.DatabaseError as exc:  # too damaged to check ("database disk image is malformed")
            found = [str(exc)]
        return [Finding("integrity", "sqlite", msg) for msg in found if msg != "ok"]
    if not query("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'", ()):
        return []  # the command says so on stderr; nothing here can be checked without it
    indexes = query("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
                    "WHERE (t.relname = ANY(?) OR t.relname ~ '^usage_p[0-9]{6}$') AND a.amname = 'btree' "
                    "AND c.relkind = 'i' AND t.relnamespace = current_schema()::regnamespace ORDER BY 1",
                    ([*BY_NAME, "meta"],))  # relkind 'i': a partitioned table's index is checked in its partitions
    out = []
    for (name,) in indexes:  # each in a savepoint: the error of one damaged index aborts only its own check
        query("SAVEPOINT amcheck", ())
        try:
            query("SELECT bt_index_check(?::regclass, true)", (name,))
        except Exception as exc:  # amcheck raises the corruption it found as an error
            query("ROLLBACK TO SAVEPOINT amcheck", ())
            out.append(Finding("integrity", f"index {name}", str(exc).splitlines()[0]))
        else:
            query("RELEASE SAVEPOINT amcheck", ())
    return out


def _amount_columns(table: str) -> list[str]:
    return [c for c, w in BY_NAME[table].values if w in FIXED_WORDS]


def totals(query: Query, *, cluster: str) -> list[Finding]:
    """Each running total against the sum of its hour rows, per key and amount, exactly."""
    compacted = _compacted(query, cluster)
    out = []
    for total_table, hourly, key in TOTALS:
        columns = [c for c in _amount_columns(total_table) if c in _amount_columns(hourly)]
        keys = ", ".join(key)
        sums = ", ".join(f"SUM({c}) AS {c}" for c in columns)
        booked = _by_key(query(f"SELECT {keys}, {', '.join(columns)} FROM {total_table} WHERE cluster = ?",
                               (cluster,)), key=key, columns=columns)
        summed = _by_key(query(f"SELECT {keys}, {sums} FROM {hourly} WHERE cluster = ? GROUP BY {keys}", (cluster,)),
                         key=key, columns=columns)
        for k in sorted(set(booked) | set(summed), key=str):
            have, want = booked.get(k, {}), summed.get(k, {})
            for column in columns:
                t, s = have.get(column, Decimal(0)), want.get(column, Decimal(0))
                if t == s or (compacted and t > s):
                    continue
                out.append(Finding("total", f"{cluster} {total_table} {'/'.join(map(str, k))} {column}",
                                   f"total {t} != {s}, the sum of its {hourly} rows"))
    return out


def _by_key(rows: list[tuple[Any, ...]], *, key: tuple[str, ...],
            columns: list[str]) -> dict[tuple[Any, ...], dict[str, Decimal]]:
    """Rows of key columns then amounts, as amounts by column name under their key."""
    out = {}
    for row in rows:
        named = dict(zip((*key, *columns), row, strict=True))
        out[tuple(named[k] for k in key)] = {c: Decimal(named[c] or 0) for c in columns}
    return out


def mark_compacted(tx: Tx, *, cluster: str, before_hour: int) -> None:
    """Record, in the compaction's transaction, that ``cluster``'s hour rows before ``before_hour`` are gone."""
    tx.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
               (COMPACTED + cluster, str(before_hour)))


def _compacted(query: Query, cluster: str) -> bool:
    return bool(query("SELECT value FROM meta WHERE key = ?", (COMPACTED + cluster,)))


def conservation(query: Query, *, cluster: str) -> list[Finding]:
    """Per node and hour of its books: allocated + unallocated + unobserved = GPUs x the hour's booked seconds."""
    spans = {node: (float(since if since is not None else booked), float(booked)) for node, since, booked in query(
        "SELECT node, since, booked_ts FROM agents WHERE cluster = ?", (cluster,))}
    gpus = {node: sum(json.loads(by_model).values()) for node, by_model in query(
        "SELECT node, gpus_by_model FROM fleet WHERE cluster = ?", (cluster,))}
    horizon = _horizon(query, cluster)
    seconds: dict[tuple[str, int], float] = defaultdict(float)
    for table, column in CAPACITY:
        for node, hour, s in query(f"SELECT node, hour, SUM({column}) AS {column} FROM {table} WHERE cluster = ? "
                                   "GROUP BY node, hour", (cluster,)):
            seconds[(node, int(hour))] += float(s or 0)
    out = []
    for node in sorted(set(spans) & set(gpus)):
        since, until = spans[node]
        for hour in _hours(since, until, extra=[h for (n, h) in seconds if n == node]):
            if hour < horizon:
                continue  # dropped by compaction
            expected = gpus[node] * max(0.0, min(hour + HOUR, until) - max(hour, since))
            have = seconds.get((node, hour))
            if have is None and expected > SECONDS_TOLERANCE:
                out.append(Finding("conservation", f"{cluster} node {node} hour {_iso(hour)}",
                                   f"no rows, {expected:.6f} GPU-seconds expected"))
            elif have is not None and abs(have - expected) > SECONDS_TOLERANCE:
                out.append(Finding("conservation", f"{cluster} node {node} hour {_iso(hour)}",
                                   f"allocated + unallocated + unobserved = {have:.6f} GPU-seconds, "
                                   f"{gpus[node]} GPUs x {expected / gpus[node] if gpus[node] else 0:.6f} s "
                                   f"= {expected:.6f}"))
    return out


def _hours(since: float, until: float, *, extra: list[int]) -> Iterator[int]:
    """Every hour the span touches, and any other hour that has rows."""
    hours = set(extra)
    h = hour_of(since)
    while h < until:
        hours.add(h)
        h += HOUR
    yield from sorted(hours)


def _horizon(query: Query, cluster: str) -> int:
    for (value,) in query("SELECT value FROM meta WHERE key = ?", (COMPACTED + cluster,)):
        return int(value)
    return 0


def _iso(hour: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(hour, tz=datetime.UTC).strftime("%Y-%m-%dT%H:00Z")


def marks(query: Query, *, cluster: str, rows: bool = True) -> list[Finding]:
    """The marks against themselves and (``rows``) against each booked node's newest row, a scan of the hourly
    tables: what the aggregator's start leaves out."""
    out = []
    books: dict[str, tuple[Any, Any]] = {}
    for node, since, booked in query("SELECT node, since, booked_ts FROM agents WHERE cluster = ?", (cluster,)):
        books[node] = (since, booked)
        if since is not None and float(since) > float(booked):
            out.append(Finding("mark", f"{cluster} node {node}",
                               f"books start at {float(since)} after their last booked snapshot {float(booked)}"))
    for node, n in query("SELECT node, COUNT(*) FROM hwm WHERE cluster = ? GROUP BY node", (cluster,)):
        if node not in books:
            out.append(Finding("mark", f"{cluster} node {node}", f"{n} counter marks but no books (agents row)"))
    for node, (_since, booked) in sorted(books.items() if rows else ()):
        for table, _column in CAPACITY:
            for (last,) in query(f"SELECT MAX(hour) FROM {table} WHERE cluster = ? AND node = ?", (cluster, node)):
                if last is not None and int(last) > hour_of(float(booked)):
                    out.append(Finding("mark", f"{cluster} node {node}",
                                       f"{table} has rows in hour {_iso(int(last))}, after its last booked "
                                       f"snapshot ({_iso(hour_of(float(booked)))})"))
    commitments = query("SELECT commitment, booked_until FROM commitment_marks WHERE cluster = ?", (cluster,))
    for name, until in commitments if rows else ():
        for (last,) in query("SELECT MAX(hour) FROM unused_commitment WHERE cluster = ? AND commitment = ?",
                             (cluster, name)):
            if last is not None and int(last) > hour_of(float(until)):
                out.append(Finding("mark", f"{cluster} commitment {name}",
                                   f"unused_commitment has rows in hour {_iso(int(last))}, after its mark"))
    return out
