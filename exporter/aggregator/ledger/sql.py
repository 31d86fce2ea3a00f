"""Hour-rows and totals as SQL: the one place where a named number (a key's field, an amount's field)
becomes a column, for every table the ledger adds into."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from exporter.aggregator.ledger.backend import Tx
from exporter.aggregator.ledger.fixed import to_db
from exporter.aggregator.ledger.schema import fixed_places
from exporter.model.books import _Amounts
from exporter.model.named_rows import Select

_A = TypeVar("_A", bound=_Amounts)

TableRows = Mapping[Any, _Amounts]  # a NamedTuple key -> amounts


def accumulate(tx: Tx, table: str, *, keys: tuple[str, ...], rows: TableRows, cluster: str) -> None:
    """Add ``rows`` (key -> amounts) into ``table``: insert new keys, add to existing ones.

    Columns are the key's field names and the amounts' field names: the one place where a named number
    becomes a column."""
    if not rows:
        return
    values = next(iter(rows.values())).columns()
    cols = ", ".join(("cluster", *keys, *values))
    marks = ", ".join("?" * (1 + len(keys) + len(values)))
    add = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in values)
    sql = f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT (cluster, {', '.join(keys)}) DO UPDATE SET {add}"
    if not tx.fixed_as_units:  # PostgreSQL: decimals into NUMERIC as they are
        tx.executemany(sql, ((cluster, *k, *v.values()) for k, v in rows.items()))  # streamed: no list of every row
        return
    places = fixed_places(table)
    at = tuple((c, places[c]) for c in values)
    tx.executemany(sql, ((cluster, *k, *[to_db(x, column=c, places=p)
                                         for (c, p), x in zip(at, v.values(), strict=True)]) for k, v in rows.items()))

def load_table(tx: Tx, table: str, *, key: type[Any], amounts: type[_A], cluster: str) -> dict[Any, _A]:
    """Every row of ``table`` of this cluster as key -> amounts, read by the fields' names."""
    cols = Select.of((*key._fields, *amounts.columns()))
    out = {}
    for r in tx.fetch(f"SELECT {cols.sql()} FROM {table} WHERE cluster = ?", (cluster,)):
        m = cols.mapping(r)
        out[key(**{f: m[f] for f in key._fields})] = amounts(**{f: m[f] for f in amounts.columns()})
    return out
