"""Rows read by column name: the SELECT list, name lookups and typed records come from one list of names."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from decimal import Decimal

import pytest

from exporter.model.named_rows import Select


@dataclass(frozen=True, slots=True)
class _Rec:
    state: str
    hour: int
    node: str
    cost: float


def test_sql_names_each_column_once_with_its_expression() -> None:
    cols = Select.of(("node", "currency", "cost"), cost="SUM(cost)")
    assert cols.sql() == "node, currency, SUM(cost)"
    assert cols.mapping(("n1", "USD", 4.5)) == {"node": "n1", "currency": "USD", "cost": 4.5}


def test_getter_reads_by_name_whatever_the_order_asked() -> None:
    cols = Select.of(("node", "currency", "cost"))
    assert cols.getter("cost", "node")(("n1", "USD", 4.5)) == (4.5, "n1")
    assert cols.getter("currency")(("n1", "USD", 4.5)) == ("USD",)  # always a tuple, one name or many


def test_records_convert_each_field_to_its_type() -> None:
    cols = Select.record(_Rec, skip=("state",))
    assert cols.sql() == "hour, node, cost"
    # a PostgreSQL sum comes back as Decimal, an hour as a float from arithmetic: both take the field's type
    assert cols.records(_Rec, [(3600.0, "n1", Decimal("1.25"))], state="Unallocated") == [
        _Rec(state="Unallocated", hour=3600, node="n1", cost=1.25)]


def test_records_read_the_named_columns_of_a_real_table() -> None:
    """The table's physical column order does not matter: the SELECT asks for the fields by name."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (cost REAL, node TEXT, hour INTEGER)")
    conn.execute("INSERT INTO t VALUES (2.5, 'n1', 7200)")
    cols = Select.record(_Rec, skip=("state",))
    rows = conn.execute(f"SELECT {cols.sql()} FROM t").fetchall()
    assert cols.records(_Rec, rows, state="s") == [_Rec(state="s", hour=7200, node="n1", cost=2.5)]


@pytest.mark.parametrize(("names", "exprs"), [(("a", "a"), {}), (("a",), {"b": "SUM(b)"})])
def test_bad_columns_are_refused(names: tuple[str, ...], exprs: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="bad SELECT columns"):
        Select.of(names, **exprs)


def test_records_refuse_a_record_that_is_not_these_columns() -> None:
    with pytest.raises(ValueError, match="are not the columns"):
        Select.of(("hour", "node")).records(_Rec, [], state="s")


def test_a_record_select_takes_expressions_for_some_fields() -> None:
    cols = Select.record(_Rec, skip=("state",), cost="SUM(cost)")
    assert cols.names == ("hour", "node", "cost")
    assert cols.sql() == "hour, node, SUM(cost)"


def test_a_row_of_the_wrong_length_is_refused_as_a_mapping() -> None:
    cols = Select.of(("node", "currency", "cost"))
    with pytest.raises(ValueError):
        cols.mapping(("n1", "USD"))
    with pytest.raises(ValueError):
        cols.mapping(("n1", "USD", 4.5, "extra"))
