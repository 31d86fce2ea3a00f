"""The PostgreSQL backend: psycopg 3 through a small pool, usage partitioned by month, NUMERIC money.

Amounts are NUMERIC(38,9) (energy NUMERIC(38,3)) and come back as ``Decimal``: booked exactly, summed
exactly. A connection broken mid-transaction leaves
nothing behind (the server rolls the transaction back) and the pool replaces it on the next call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from exporter.aggregator.ledger.backend import LedgerError, Row, Tx, migrate
from exporter.aggregator.ledger.pg_bulk import copy_upsert
from exporter.aggregator.ledger.schema import POSTGRES, UPDATE_FILLFACTOR
from exporter.logs import get_logger

T = TypeVar("T")
log = get_logger("ledger")
CONNECT_TIMEOUT = 5  # seconds, per connection attempt
STATEMENT_TIMEOUT_MS = 30_000
#: The server ends a session left inside a transaction this long: a leader paused mid-tick (SIGSTOP, a frozen VM)
#: would otherwise hold the fence row's lock, and keep the next leader from taking its term, until it woke.
IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000
_SECRET_PARAMS = {"password", "sslpassword"}
Reader = Callable[[str, Iterable[Any]], list[Row]]
_PARTITION = re.compile(r"^usage_p(\d{4})(\d{2})$")


def redact(url: str) -> str:
    """The URL with any password (in the authority or a query parameter) replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = urlencode([(k, "***" if k in _SECRET_PARAMS else v) for k, v in parse_qsl(parts.query)], safe="*/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _month_bounds(hour: int) -> tuple[str, int, int]:
    """(partition name, first second of the month, first second of the next month) for ``hour``."""
    d = datetime.fromtimestamp(hour, UTC)
    start = datetime(d.year, d.month, 1, tzinfo=UTC)
    end = datetime(d.year + (d.month == 12), d.month % 12 + 1, 1, tzinfo=UTC)
    return f"usage_p{d.year:04d}{d.month:02d}", int(start.timestamp()), int(end.timestamp())


class PgTx:
    """A transaction on one pooled connection: ``?`` placeholders become ``%s``, NUMERIC comes back as Decimal."""

    fixed_as_units = False

    def __init__(self, cur: Any, *, bulk: bool = False) -> None:
        self.cur = cur
        self.bulk = bulk  # many-row upserts through COPY (a writer's transaction)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        self.cur.execute(sql.replace("?", "%s"), tuple(params) if params else None)
        return int(self.cur.rowcount)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for every row of ``rows``: an upsert through ``COPY`` (``ledger_pg_bulk``; even of one
        row, so money lands the same whatever the row count), anything else row by row."""
        params = [tuple(r) for r in rows]
        if not (self.bulk and params and copy_upsert(self.cur, sql, rows=params)):
            self.cur.executemany(sql.replace("?", "%s"), params)

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows as tuples, NUMERIC amounts as Decimal; none for a statement that returns no rows (``SAVEPOINT``)."""
        self.cur.execute(sql.replace("?", "%s"), tuple(params) if params else None)
        return [tuple(r) for r in self.cur.fetchall()] if self.cur.description is not None else []


def _connect_kwargs(password_file: Path | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT,
                              "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS} "
                                         f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}"}
    if password_file is not None:
        kwargs["password"] = password_file.read_text().strip()  # the URL's passfile= also works (libpq)
    return kwargs


class PostgresBackend:
    """A ledger in a PostgreSQL database, shared by every aggregator of every cluster that points at it."""

    dialect = POSTGRES
    for_update = " FOR UPDATE"

    def __init__(self, url: str, *, password_file: Path | None = None, pool_size: int = 2) -> None:
        self.url = url
        self.password_file = password_file
        self.pool_size = pool_size
        self._pool: Any = None
        self._partitions: set[str] = set()
        self._bulk = False  # many-row upserts through COPY: once open, if the role may create temporary tables

    def open(self) -> None:
        """Open the pool, migrate (one aggregator at a time) and learn the usage partitions; ``LedgerError``
        otherwise."""
        try:
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise LedgerError("a postgresql:// ledger needs the 'postgres' extra (psycopg, psycopg-pool)") from None
        try:
            kwargs = _connect_kwargs(self.password_file)
        except OSError as exc:
            raise LedgerError(f"ledger_password_file: {exc}") from None
        self._pool = ConnectionPool(self.url, kwargs=kwargs, min_size=1, max_size=self.pool_size, open=False,
                                    check=ConnectionPool.check_connection, timeout=CONNECT_TIMEOUT,
                                    name="ledger")
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT * 2)
            self.transaction(self._migrate)
            self._bulk = bool(self._read("SELECT has_database_privilege(current_database(), 'TEMPORARY')")[0][0])
            if not self._bulk:  # a role without temporary tables: every upsert goes row by row (slower, same rows)
                log.warning("ledger_copy_off", ledger=redact(self.url),
                            reason="the ledger's role may not create temporary tables")
            self._partitions = {r[0] for r in self._read(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'usage'")}
        except Exception as exc:
            self.close()
            if isinstance(exc, LedgerError):
                raise
            raise LedgerError(f"{redact(self.url)}: {exc}") from None

    def _migrate(self, tx: Tx) -> None:
        tx.execute("SELECT pg_advisory_xact_lock(7313)")  # aggregators starting together migrate one by one
        migrate(tx, dialect=POSTGRES, where=redact(self.url))

    def _read(self, sql: str) -> list[Row]:
        return self.transaction(lambda tx: tx.fetch(sql))

    def transaction(self, body: Callable[[Tx], T]) -> T:
        """Run ``body`` in one transaction on a pooled connection; any failure rolls all of it back and re-raises."""
        if self._pool is None:
            raise LedgerError("ledger is not open")
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            return body(PgTx(cur, bulk=self._bulk))

    def ensure_usage_partitions(self, hours: Iterable[int]) -> None:
        """Create the month partitions these hours (and the month after each) need, in a short
        transaction of their own, serialized by an advisory lock so replicas never race."""
        wanted = {_month_bounds(h) for h in set(hours)}  # a tick books few distinct hours
        wanted |= {_month_bounds(end) for _n, _s, end in wanted}  # one month ahead
        missing = sorted(b for b in wanted if b[0] not in self._partitions)
        if not missing:
            return

        def create(tx: Tx) -> None:
            tx.execute("SELECT pg_advisory_xact_lock(7314)")
            for name, start, end in missing:
                tx.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF usage FOR VALUES FROM ({start}) TO ({end}) "
                           f"WITH (fillfactor = {UPDATE_FILLFACTOR})")  # updated every tick: ledger_schema

        self.transaction(create)
        self._partitions.update(name for name, _s, _e in missing)

    def drop_usage_before(self, tx: Tx, *, hour: int, cluster: str) -> int:
        """Whole months before ``hour`` go as partitions (for every cluster in the database: retention is
        the database's); the rest of the boundary month is deleted row by row for this cluster."""
        removed = 0
        for name in sorted(self._partitions):
            m = _PARTITION.match(name)
            if m is None:
                continue
            _n, _start, end = _month_bounds(int(datetime(int(m[1]), int(m[2]), 1, tzinfo=UTC).timestamp()))
            if end <= hour:
                removed += int(tx.fetch(f"SELECT COUNT(*) FROM {name}")[0][0])
                tx.execute(f"DROP TABLE {name}")
                self._partitions.discard(name)
        return removed + tx.execute("DELETE FROM usage WHERE cluster = ? AND hour < ?", (cluster, hour))

    def describe(self) -> str:
        """The URL with its password redacted."""
        return redact(self.url)

    def close(self) -> None:
        """Close the pool; the backend may be opened again."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


@contextmanager
def postgres_reader(url: str, *, password_file: Path | None = None) -> Iterator[Reader]:
    """A read-only query function over a PostgreSQL ledger (``report``)."""
    import psycopg

    try:
        conn = psycopg.connect(url, **_connect_kwargs(password_file))
    except (psycopg.Error, OSError) as exc:
        raise LedgerError(f"{redact(url)}: {exc}") from None
    try:
        conn.read_only = True
        cur = conn.cursor()
        yield lambda sql, params: PgTx(cur).fetch(sql, list(params))
    except psycopg.Error as exc:
        raise LedgerError(f"{redact(url)}: not a gpu-cost-exporter ledger ({exc})") from None
    finally:
        conn.close()


def postgres_snapshot(url: str, *, password_file: Path | None = None) -> tuple[Reader, Callable[[], None]]:
    """A read-only query function over one REPEATABLE READ transaction, and its close: a long read (a FOCUS
    export of a month) sees one consistent state of the books while aggregators keep committing. Database
    errors come out as ``LedgerError`` with the URL redacted."""
    import psycopg

    try:
        conn = psycopg.connect(url, **_connect_kwargs(password_file))
        conn.read_only = True
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    except (psycopg.Error, OSError) as exc:
        raise LedgerError(f"{redact(url)}: {_one_line(exc)}") from None
    cur = conn.cursor()

    def query(sql: str, params: Iterable[Any]) -> list[Row]:
        try:
            return PgTx(cur).fetch(sql, list(params))
        except psycopg.Error as exc:
            raise LedgerError(f"{redact(url)}: {_one_line(exc)}") from None

    return query, conn.close


def _one_line(exc: BaseException) -> str:
    """libpq's messages span lines (a hint after a tab): one line for a log or a CLI error."""
    return " ".join(str(exc).split())
