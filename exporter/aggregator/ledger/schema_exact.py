"""Schema 13 -> 14: the ledger's amounts become fixed-point (see ``schema``'s docstring), each value rounded
half-even once, on both backends."""

from __future__ import annotations

from collections.abc import Sequence

from exporter.aggregator.ledger.schema_types import FIXED_WORDS, Dialect, Table, create_table

#: SQLite's function (registered on the writer's connection) turning a schema-12 REAL into integer units.
SQLITE_UNITS_FN = "gpucost_units"


def _pg_half_even(expr: str, places: int) -> str:
    """PostgreSQL SQL rounding the numeric ``expr`` half-even to ``places`` digits (its ``round`` on numeric
    rounds ties away from zero): a tie goes to the even neighbour."""
    s = f"(({expr}) * 1e{places})"
    return (f"((CASE WHEN {s} - floor({s}) = 0.5 THEN floor({s}) + mod(abs(floor({s})), 2) ELSE round({s}) END)"
            f" / 1e{places})")


def exact_amounts(d: Dialect, *, tables: Sequence[Table], old: Sequence[Table]) -> list[str]:
    """Schema 13 -> 14: amounts become fixed-point, each value rounded half-even once (a REAL by its shortest
    decimal repr, as booking reads agents' floats). SQLite rebuilds each table (a column's type cannot change
    in place) converting through ``SQLITE_UNITS_FN``; PostgreSQL alters the columns' types (usage's partitions
    follow), reading DOUBLE PRECISION through its text (shortest round-trip digits), NUMERIC as it is."""
    out: list[str] = []
    old_types = {t.name: dict(t.values) for t in old}
    for t in tables:
        places = {c: FIXED_WORDS[w] for c, w in t.values if w in FIXED_WORDS}
        if not places:
            continue
        if d.partition_usage:
            for c, p in places.items():
                source = f"{c}::text::numeric" if old_types[t.name][c] != "money" else c
                out.append(f"ALTER TABLE {t.name} ALTER COLUMN {c} TYPE NUMERIC(38,{p}) USING "
                           f"{_pg_half_even(source, p)}")
            continue
        cols = t.columns()
        exprs = ", ".join(f"{SQLITE_UNITS_FN}({c}, {places[c]})" if c in places else c for c in cols)
        out += [create_table(d, t, name=f"{t.name}_v14"),
                f"INSERT INTO {t.name}_v14 ({', '.join(cols)}) SELECT {exprs} FROM {t.name}",
                f"DROP TABLE {t.name}", f"ALTER TABLE {t.name}_v14 RENAME TO {t.name}"]
    if not d.partition_usage:
        out.append("CREATE INDEX usage_namespace ON usage (cluster, namespace, hour)")
    return out
