"""Opens a ledger for an export, read-only, on either backend: a SQLite file or a ``postgresql://`` URL.

The export reads through the ``Query`` callable the reports use; only the catalog queries differ by
dialect. Each reader is one read transaction, so a long export sees one state of the books while the
aggregator commits (SQLite: a WAL snapshot; PostgreSQL: REPEATABLE READ).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from exporter.aggregator.ledger.backend import is_postgres
from exporter.aggregator.ledger.report import Query
from exporter.aggregator.ledger.sqlite import decoded_rows


@dataclass(frozen=True, slots=True)
class LedgerReader:
    """A read-only view of a ledger: its query function, its SQL dialect, how to let it go."""

    query: Query
    dialect: str  # "sqlite" or "postgresql"
    close: Callable[[], None]
    where: str  # the ledger, fit for a message (no password)


def open_sqlite(path: Path) -> sqlite3.Connection:
    """A read-only connection to a ledger file (WAL lets it read while the aggregator writes)."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such ledger")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)


def open_ledger(target: str, *, password_file: Path | None = None) -> LedgerReader:
    """Raises FileNotFoundError for a missing file and ``LedgerError`` for a database that cannot be reached."""
    if is_postgres(target):
        from exporter.aggregator.ledger.postgres import postgres_snapshot, redact

        query, close = postgres_snapshot(target, password_file=password_file)
        return LedgerReader(query, "postgresql", close, redact(target))
    conn = open_sqlite(Path(target))
    conn.execute("BEGIN")  # one read transaction: the export's snapshot
    return LedgerReader(lambda sql, params: decoded_rows(conn.execute(sql, tuple(params))), "sqlite", conn.close,
                        target)
