"""The SQLite backend: one file in WAL mode, one connection, ``BEGIN IMMEDIATE`` write transactions."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from exporter.aggregator.ledger.backend import LedgerError, Row, Tx, migrate
from exporter.aggregator.ledger.fixed import decoder, units_of_real
from exporter.aggregator.ledger.schema import SQLITE
from exporter.aggregator.ledger.schema_exact import SQLITE_UNITS_FN

T = TypeVar("T")


class SqliteTx:
    """A transaction on the backend's one connection: amounts travel as integer units (``ledger.fixed``)."""

    fixed_as_units = True

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        return self.db.execute(sql, tuple(params)).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per row of ``rows``."""
        self.db.executemany(sql, rows)

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows as tuples, amounts as decimals."""
        return decoded_rows(self.db.execute(sql, tuple(params)))


class SqliteBackend:
    """A ledger in one SQLite file, written through one connection by one aggregator replica."""

    dialect = SQLITE
    for_update = ""  # BEGIN IMMEDIATE already holds the database's one write lock

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError("ledger is not open")
        return self._conn

    def open(self) -> None:
        """Create the file (and its directory) if needed, set WAL and full sync, migrate; ``LedgerError`` otherwise."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA cache_size=-65536")
            conn.create_function(SQLITE_UNITS_FN, 2, units_of_real, deterministic=True)  # schema 14's migration
            self._conn = conn
            self.transaction(lambda tx: migrate(tx, dialect=SQLITE, where=str(self.path)))
        except sqlite3.DatabaseError as exc:
            self.close()
            raise LedgerError(f"{self.path}: {exc}") from exc
        except LedgerError:
            self.close()
            raise

    def transaction(self, body: Callable[[Tx], T]) -> T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; any failure rolls all of it back and re-raises.

        A full disk (``SQLITE_FULL``) or an I/O error may have rolled the transaction back already: the ROLLBACK
        is then skipped, so the error raised is the one that says why (not "no transaction is active")."""
        db = self._db()
        if db.in_transaction:  # a ROLLBACK that failed last time (an I/O error): that transaction ends here
            db.execute("ROLLBACK")
        db.execute("BEGIN IMMEDIATE")
        try:
            out = body(SqliteTx(db))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the error raised is the one that says why
                    db.execute("ROLLBACK")
            raise
        return out

    def ensure_usage_partitions(self, hours: Iterable[int]) -> None:
        """Nothing to do: SQLite keeps usage in one table."""
        return None

    def drop_usage_before(self, tx: Tx, *, hour: int, cluster: str) -> int:
        """Retention of the usage table, row by row for this cluster; rows removed."""
        return tx.execute("DELETE FROM usage WHERE cluster = ? AND hour < ?", (cluster, hour))

    def describe(self) -> str:
        """The database file's path."""
        return str(self.path)

    def close(self) -> None:
        """Close the connection; the backend may be opened again."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for tests that need to break the database on purpose."""
        return self._db()


def decoded_rows(cur: sqlite3.Cursor) -> list[Row]:
    """A cursor's rows with amounts' integer units turned back into decimals."""
    rows = cur.fetchall()
    decode = decoder(cur.description)
    return rows if decode is None else [decode(r) for r in rows]


@contextmanager
def sqlite_reader(path: Path) -> Iterator[Callable[[str, Iterable[Any]], list[Row]]]:
    """A read-only query function over a ledger file (``report``)."""
    if not path.exists():
        raise LedgerError(f"{path}: no such ledger")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield lambda sql, params: decoded_rows(conn.execute(sql, tuple(params)))
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"{path}: not a gpu-cost-exporter ledger ({exc})") from None
    finally:
        conn.close()
