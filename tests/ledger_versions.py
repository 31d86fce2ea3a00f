"""Make a fresh ledger look as an older build left it, for migration tests: the tables and columns each
later schema added are dropped (the usage table itself, whose key gained ``claim`` in schema 7 and ``sharing``
in schema 10 and whose ``list_cost`` came with schema 4, is left to the tests that rebuild it after
``back_to``)."""

from __future__ import annotations

from collections.abc import Sequence

from exporter.aggregator.ledger.postgres import _month_bounds
from exporter.aggregator.ledger.schema import (
    FIXED_WORDS,
    POSTGRES,
    SQLITE,
    TABLES,
    TABLES_V13,
    TABLES_V14,
    Table,
    create_table,
)
from exporter.aggregator.ledger.store import TickWrite
from exporter.model.books import UsageAmounts, UsageKey
from exporter.model.exact import book, exact

_ENERGY_TABLES = ("unallocated", "unobserved", "unallocated_totals", "unobserved_totals", "unused_commitment",
                  "unused_commitment_totals")
_V4_TABLES = ("unused_commitment", "unused_commitment_totals", "commitment_marks", "node_billing")
_V4_LIST_COST = ("unallocated", "unobserved", "totals", "unallocated_totals", "unobserved_totals")
_V13_COLUMNS = ("co2e_g", "co2e_s", "unmeasured_energy_s")


def exact_undone(*, backend: str, usage: bool = True) -> list[str]:
    """Statements putting back a fresh (empty) ledger's amount tables as schema 13 made them (REAL / NUMERIC
    money, DOUBLE PRECISION seconds); ``usage`` False: a test rebuilt that table itself (``usage_as_of``)."""
    dialect = POSTGRES if backend == "postgres" else SQLITE
    old = {t.name: t for t in TABLES_V13}
    out: list[str] = []
    for t in TABLES:
        if (t.name == "usage" and not usage) or not any(w in FIXED_WORDS for _c, w in t.values):
            continue
        out += [f"DROP TABLE {t.name}", create_table(dialect, old[t.name])]
        if t.name == "usage":
            out.append("CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)")
    return out


def back_to(version: int, *, backend: str = "sqlite", usage: bool = True) -> list[str]:
    """Statements (SQLite or PostgreSQL) undoing schemas ``version + 1`` .. 15 on a fresh ledger, then
    marking it ``version``; ``usage`` False: a test rebuilt the usage table itself, before these."""
    out: list[str] = exact_undone(backend=backend, usage=usage) if version < 14 else []
    if version < 15:
        out.append("DROP TABLE budget_holds")
    if version == 14 and usage:  # schema 15's queue columns are in the usage key: the table is rebuilt without them
        old = {t.name: t for t in TABLES_V14}["usage"]
        out += ["DROP TABLE usage", create_table(POSTGRES if backend == "postgres" else SQLITE, old),
                "CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)"]
    if version < 13:
        out += [f"ALTER TABLE {t} DROP COLUMN {c}" for t in ("totals", *_ENERGY_TABLES) for c in _V13_COLUMNS]
        out += [f"ALTER TABLE {t} DROP COLUMN split_s" for t in ("hwm", "totals")]
        if usage:
            out += [f"ALTER TABLE usage DROP COLUMN {c}" for c in ("split_s", *_V13_COLUMNS)]
    if version < 12:
        out.append("DROP TABLE node_devices")
    if version < 9:
        out.append("DROP TABLE fleet")
    if version < 8:
        out.append("DROP TABLE unmeasured_energy_totals")
        out += [f"ALTER TABLE {t} DROP COLUMN energy_j" for t in _ENERGY_TABLES]
    if version < 6:
        out.append("DROP TABLE namespace_team")
    if version < 5:
        out.append("DROP TABLE evidence")
    if version < 4:
        out += [f"DROP TABLE {t}" for t in _V4_TABLES]
        out += [f"ALTER TABLE {t} DROP COLUMN list_cost" for t in _V4_LIST_COST]
        out.append("ALTER TABLE totals DROP COLUMN energy_j")
    return [*out, f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'"]


def usage_as_of(tables: Sequence[Table], *, backend: str, hour: int) -> list[str]:
    """Statements putting back the usage table as the schema of ``tables`` made it (empty; on PostgreSQL with the
    partition of ``hour``'s month), for the tests that rebuild it before ``back_to``."""
    (usage,) = [tbl for tbl in tables if tbl.name == "usage"]
    pg = backend == "postgres"
    stmts = ["DROP TABLE usage", create_table(POSTGRES if pg else SQLITE, usage)]
    if pg:
        name, start, end = _month_bounds(hour)
        stmts.append(f"CREATE TABLE {name} PARTITION OF usage FOR VALUES FROM ({start}) TO ({end})")
    return [*stmts, "CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)"]


def idle_tick(key: UsageKey, *, seconds: float, price: float) -> TickWrite:
    """One usage row booked after a migration: ``seconds`` held, all idle, at ``price`` per GPU-hour."""
    w = TickWrite()
    held = book(exact(seconds))
    cost = book(held / 3600 * exact(price))
    w.usage[key] = UsageAmounts(allocated_s=held, idle_s=held, cost=cost, idle_cost=cost, list_cost=cost)
    return w
