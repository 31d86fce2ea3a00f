"""The seam between the ledger and its database: what a backend must do, and the migration both share.

Ledger SQL is written once with ``?`` placeholders and standard ``ON CONFLICT`` upserts (SQLite and
PostgreSQL both speak them); a backend translates placeholders, owns its connection, its transactions
and its storage tricks (partitions on PostgreSQL). All calls are blocking: the ledger runs them on its
own worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from exporter.aggregator.ledger.schema import SCHEMA_VERSION, Dialect, current_schema, migrations

T = TypeVar("T")
Row = tuple[Any, ...]


class LedgerError(RuntimeError):
    """The ledger cannot be opened or migrated, or is not a gpu-cost-exporter ledger."""


class StaleTerm(RuntimeError):
    """The fencing term in the ledger moved on: another replica leads, this one must not book."""


class Tx(Protocol):
    """One open transaction (or read) on a backend."""

    fixed_as_units: bool  # amounts are written as integer units (SQLite), else as decimals (PostgreSQL NUMERIC)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per row of ``rows``."""

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows as tuples; amounts come back as ``Decimal``."""


class Backend(Protocol):
    """A database the ledger can live in (SQLite or PostgreSQL): connection, transactions, partitions, retention."""

    dialect: Dialect
    for_update: str  # appended to the fencing read: `` FOR UPDATE`` where rows lock individually

    def open(self) -> None:
        """Connect and migrate the schema; ``LedgerError`` when it cannot or the schema is not ours."""

    def transaction(self, body: Callable[[Tx], T]) -> T:
        """Run ``body`` in one write transaction; any failure rolls all of it back and re-raises."""

    def ensure_usage_partitions(self, hours: Iterable[int]) -> None:
        """Make sure rows of these hours have somewhere to go (no-op without partitions)."""

    def drop_usage_before(self, tx: Tx, *, hour: int, cluster: str) -> int:
        """Retention of the usage table; rows removed."""

    def describe(self) -> str:
        """Where the ledger is, fit for a log line (no password)."""

    def close(self) -> None:
        """Release the connection(s); the backend may be opened again."""


def meta_version(tx: Tx) -> int:
    """The schema version recorded in ``meta``; 0 for an empty database."""
    tx.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    found = tx.fetch("SELECT value FROM meta WHERE key = 'schema_version'")
    return int(found[0][0]) if found else 0


def migrate(tx: Tx, *, dialect: Dialect, where: str) -> None:
    """Bring the schema to ``SCHEMA_VERSION``: a fresh ledger is created whole, an older one migrated
    step by step, a newer one refused untouched. Call inside one transaction (a crash leaves the old schema)."""
    version = meta_version(tx)
    if version > SCHEMA_VERSION:
        raise LedgerError(f"{where}: schema version {version} is newer than this build ({SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        steps = current_schema(dialect)
    else:
        steps = [s for v in range(version + 1, SCHEMA_VERSION + 1) for s in migrations(dialect)[v]()]
    for stmt in steps:
        tx.execute(stmt)
    tx.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
               "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))


def is_postgres(target: str) -> bool:
    """Whether a ledger target is a PostgreSQL URL (else it is a SQLite file path)."""
    return target.startswith(("postgresql://", "postgres://"))
