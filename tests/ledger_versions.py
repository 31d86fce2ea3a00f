"""Make a fresh ledger look as an older build left it, for migration tests: the tables and columns each
later schema added are dropped (the usage table itself, whose key gained ``claim`` in schema 7 and ``sharing``
in schema 10 and whose ``list_cost`` came with schema 4, is left to the tests that rebuild it after
``back_to``)."""

from __future__ import annotations

from collections.abc import Sequence

from exporter.aggregator.ledger.postgres import _month_bounds
from exporter.aggregator.ledger.schema import POSTGRES, SQLITE, Table, create_table
from exporter.aggregator.ledger.store import TickWrite
from exporter.model.books import UsageAmounts, UsageKey

_ENERGY_TABLES = ("unallocated", "unobserved", "unallocated_totals", "unobserved_totals", "unused_commitment",
                  "unused_commitment_totals")
_V4_TABLES = ("unused_commitment", "unused_commitment_totals", "commitment_marks", "node_billing")
_V4_LIST_COST = ("unallocated", "unobserved", "totals", "unallocated_totals", "unobserved_totals")
_V13_COLUMNS = ("co2e_g", "co2e_s", "unmeasured_energy_s")


def back_to(version: int) -> list[str]:
    """Statements (SQLite or PostgreSQL) undoing schemas ``version + 1`` .. 13 on a fresh ledger, then
    marking it ``version``. Below 10 the usage table keeps schema 13's columns (SQLite's rebuilds of usage in
    migrations 7 and 10 drop them; PostgreSQL's migration adds them only if missing)."""
    out: list[str] = []
    if version < 13:
        out += [f"ALTER TABLE {t} DROP COLUMN {c}" for t in ("totals", *_ENERGY_TABLES) for c in _V13_COLUMNS]
        out += [f"ALTER TABLE {t} DROP COLUMN split_s" for t in ("hwm", "totals")]
        if version >= 10:
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
    cost = seconds / 3600 * price
    w.usage[key] = UsageAmounts(allocated_s=seconds, used_s=0.0, unmeasured_s=0.0, idle_s=seconds, cost=cost,
                                idle_cost=cost, energy_j=0.0, list_cost=cost)
    return w
