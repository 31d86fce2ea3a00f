"""The ledger schema's building blocks: dialects, tables as column lists, and the DDL of one table per dialect.

Kept apart from ``schema`` (the tables themselves and their migrations) so a migration module can build on them
without importing the schema it migrates.
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_WORDS = {"fixed": 9, "fixed0": 9, "energy": 3, "energy0": 3}  # type word -> fractional digits


@dataclass(frozen=True, slots=True)
class Dialect:
    """Column types and clauses that differ between the backends."""

    name: str
    real: str  # before schema 13, and the ``float`` columns since
    money: str  # before schema 13
    bigint: str
    fixed9: str  # schema 13: 9 fractional digits (seconds, money)
    fixed3: str  # schema 13: 3 fractional digits (energy)
    table_suffix: str  # ``WITHOUT ROWID`` on SQLite
    partition_usage: bool  # usage partitioned by month (PostgreSQL)


SQLITE = Dialect("sqlite", real="REAL", money="REAL", bigint="INTEGER", fixed9="INTEGER", fixed3="INTEGER",
                 table_suffix=" WITHOUT ROWID", partition_usage=False)
POSTGRES = Dialect("postgresql", real="DOUBLE PRECISION", money="NUMERIC", bigint="BIGINT", fixed9="NUMERIC(38,9)",
                   fixed3="NUMERIC(38,3)", table_suffix="", partition_usage=True)


@dataclass(frozen=True, slots=True)
class Table:
    """One table: key columns then value columns, each ``(name, type word)``; type words are ``text``, ``text0``
    ("" unless written), ``int``, ``real``, ``money``, ``real?`` (nullable) or ``real0`` (0 unless written) up to
    schema 12; since 13 amounts are ``fixed`` (9 digits) or ``energy`` (3 digits; ``energy0``: 0 unless written)
    and other numbers ``float`` / ``float?``."""

    name: str
    key: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...]

    def columns(self) -> tuple[str, ...]:
        """Every column of the table, ``cluster`` first: the key's, then the values'."""
        return ("cluster", *tuple(c for c, _t in self.key + self.values))



def _type(d: Dialect, word: str, *, column: str = "") -> str:
    base = {"text": "TEXT", "text0": "TEXT", "int": d.bigint, "real": d.real, "money": d.money, "real?": d.real,
            "real0": d.real,
            "float": d.real, "float?": d.real, "fixed": d.fixed9, "fixed0": d.fixed9, "energy": d.fixed3,
            "energy0": d.fixed3}[word]
    if word in ("real0", "fixed0", "energy0"):  # a column added later: rows (and writers) from before it read 0
        base = f"{base} NOT NULL DEFAULT 0"
    elif word == "text0":  # a key column added later: rows (and writers) from before it read ""
        base = f"{base} NOT NULL DEFAULT ''"
    elif not word.endswith("?"):
        base = f"{base} NOT NULL"
    if word in FIXED_WORDS and not d.partition_usage and column:
        # SQLite turns an integer sum past int64 into a REAL silently: refuse it, naming the column
        base += f" CONSTRAINT {column}_exceeds_sqlite_range CHECK (typeof({column}) = 'integer')"
    return base


def create_table(d: Dialect, t: Table, *, name: str | None = None) -> str:
    """The ``CREATE TABLE`` of ``t`` (as ``name``, when migrating through a copy) in the dialect, keyed by cluster
    first."""
    cols = ", ".join(["cluster TEXT NOT NULL"] + [f"{c} {_type(d, w, column=c)}" for c, w in t.key + t.values])
    pk = ", ".join(["cluster"] + [c for c, _w in t.key])
    partitioned = d.partition_usage and t.name == "usage"
    suffix = " PARTITION BY RANGE (hour)" if partitioned else d.table_suffix
    return f"CREATE TABLE {name or t.name} ({cols}, PRIMARY KEY ({pk})){suffix}"
