"""How each FOCUS column's values become cells: the one place that knows a column's type, its CSV text and its
Parquet type. A ``Frame`` is one hour's rows as columns (Arrow arrays, or one value for every row).

Amounts travel as ``int`` counts of 1e-9 (``NANO_SCALE``) and become ``decimal128(38, 9)`` by reinterpreting
the integers as the decimal's unscaled value (exact, no arithmetic). Their CSV text is today's ``decimal_text``
-- plain notation, trailing zeros dropped, always a decimal point -- done by Arrow kernels on the whole column.
Strings are quoted as the stdlib ``csv`` module quotes them (``QUOTE_MINIMAL``: only a cell holding a comma,
a quote or a line break, quotes doubled), and each line is joined by Arrow, so the CSV is byte-identical to the
row-by-row writer's. Arrow's own CSV writer cannot be used for the text: it quotes every string cell
(``quoting_style="needed"``) or refuses one holding a comma (``"none"``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from exporter.aggregator.focus.columns import Column, ColumnType
from exporter.aggregator.focus.format import Scalar, utc_text

NANO_SCALE = 9  # the ledger's amounts: counts of 1e-9
PARQUET_SCALE = 18  # decimal128(38, 18): 20 integer digits, finer than any amount the ledger holds


def _stdlib_quotes() -> str:
    """The characters that make ``csv.writer`` (LF line ends) quote a cell on this Python (CR varies by version)."""
    out = io.StringIO()
    probes = (",", '"', "\r", "\n")
    csv.writer(out, lineterminator="\n").writerow([f"a{c}b" for c in probes])
    return "".join(c for c in probes if f'"a{c}' in out.getvalue())


_QUOTED_CHARS = _stdlib_quotes()
_NEEDS_QUOTES = "[" + _QUOTED_CHARS.replace("\r", r"\r").replace("\n", r"\n") + "]"  # an RE2 class

Cell = Any  # a pa.Array of the hour's rows, or one Python value for all of them
Frame = dict[str, Cell]


@dataclass(frozen=True, slots=True)
class Fixed:
    """One value for every row of a frame, in the column's frame representation (an amount as nano-units)."""

    value: int | str | None


def fixed_point(units: pa.Array, *, scale: int = NANO_SCALE) -> pa.Array:
    """Integer units (int64) as ``decimal128(38, scale)`` of the same unscaled value: 1500000000 -> 1.5."""
    wide = pc.cast(units, pa.decimal128(38, 0))
    return pa.Array.from_buffers(pa.decimal128(38, scale), len(wide), wide.buffers(), offset=wide.offset)


def decimal_text(units: pa.Array, *, scale: int = NANO_SCALE) -> pa.Array:
    """Integer units of 10^-scale as ``format.decimal_text`` writes their decimal: ``2.0``, ``0.25``, ``100.0``
    (plain notation, trailing zeros dropped, always a point), on the whole column at once."""
    digits = pc.utf8_lpad(pc.cast(pc.abs_checked(units), pa.string()), width=scale + 1, padding="0")
    whole = pc.utf8_slice_codeunits(digits, start=0, stop=-scale)
    part = pc.utf8_rtrim(pc.utf8_slice_codeunits(digits, start=-scale), characters="0")
    part = pc.if_else(pc.equal(pc.utf8_length(part), 0), "0", part)
    text = pc.binary_join_element_wise(whole, part, ".")
    negative = pc.less(units, 0)
    return pc.if_else(negative, pc.binary_join_element_wise("-", text, ""), text) if pc.any(negative).as_py() else text


def quote_csv(values: pa.Array) -> pa.Array:
    """Strings as ``csv.writer`` (QUOTE_MINIMAL) writes them; null stays null (an empty, unquoted cell)."""
    needs = pc.match_substring_regex(values, _NEEDS_QUOTES)
    if not pc.any(needs).as_py():
        return values
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(values, '"', '""'), '"', "")
    return pc.if_else(needs, quoted, values)


def quote_one(value: str) -> str:
    """One string as ``quote_csv`` writes it."""
    if any(c in value for c in _QUOTED_CHARS):
        return '"' + value.replace('"', '""') + '"'
    return value


def units_of(value: Scalar) -> int | None:
    """A ``Decimal`` of at most 9 fractional digits (the row exporter's amounts) as nano-units."""
    if value is None:
        return None
    if type(value) is not Decimal:
        raise TypeError(f"expected a Decimal, got {value!r}")
    units = value.scaleb(NANO_SCALE)
    if units != units.to_integral_value():
        raise ValueError(f"{value} has more than {NANO_SCALE} fractional digits")
    return int(units)


def _fixed_csv(column: Column, value: int | str | None) -> str:
    if value is None:
        return ""
    if column.type is ColumnType.DECIMAL:
        from exporter.aggregator.focus.format import decimal_text as one_decimal

        return one_decimal(Decimal(int(value)).scaleb(-NANO_SCALE))
    if column.type is ColumnType.DATETIME:
        return utc_text(int(value))
    return quote_one(str(value))


def csv_cells(column: Column, cell: Cell) -> Cell:
    """One column's CSV text: an array of cells, or one string for every row."""
    if isinstance(cell, Fixed):
        return _fixed_csv(column, cell.value)
    if column.type is ColumnType.DECIMAL:
        return decimal_text(cell)
    if column.type is ColumnType.DATETIME:  # a batch holds a few distinct hours: each is formatted once
        encoded = pc.dictionary_encode(cell)
        texts = pa.array([utc_text(t) for t in encoded.dictionary.to_pylist()], pa.string())
        return pc.take(texts, encoded.indices)
    return quote_csv(cell)


def csv_text(frame: Frame, columns: Sequence[Column], *, rows: int) -> str:
    """The frame's rows as CSV lines (each ending in LF), in the columns' order."""
    if rows == 0:
        return ""
    cells: list[Any] = []
    for column in columns:
        cell = csv_cells(column, frame.get(column.name, Fixed(None)))
        if isinstance(cell, str) and cells and isinstance(cells[-1], str):
            cells[-1] += "," + cell  # neighbouring constants joined once, not once per row
        else:
            cells.append(cell)
    if not any(isinstance(c, pa.Array) for c in cells):
        return (",".join(cells) + "\n") * rows
    lines = pc.binary_join_element_wise(*cells, ",", null_handling="replace", null_replacement="")
    one = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, rows], pa.int32()), lines), "\n")
    return str(one[0].as_py()) + "\n"


PARQUET_TYPES: Mapping[ColumnType, pa.DataType] = {
    ColumnType.DECIMAL: pa.decimal128(38, PARQUET_SCALE),
    ColumnType.DATETIME: pa.timestamp("us", tz="UTC"),  # Parquet has no second unit
    ColumnType.STRING: pa.string(), ColumnType.JSON: pa.string()}


def _array(column: Column, cell: Cell, *, rows: int) -> pa.Array:
    if isinstance(cell, Fixed):
        cell = pa.array([cell.value] * rows, pa.int64() if column.type in (ColumnType.DECIMAL, ColumnType.DATETIME)
                        else pa.string())
    if column.type is ColumnType.DECIMAL:
        return pc.cast(fixed_point(cell), PARQUET_TYPES[column.type])
    if column.type is ColumnType.DATETIME:
        return pc.cast(pc.cast(cell, pa.timestamp("s", tz="UTC")), PARQUET_TYPES[column.type])
    return cell


def parquet_table(frame: Frame, columns: Sequence[Column], *, schema: pa.Schema, rows: int) -> pa.Table:
    """The frame as a table of the Parquet schema (``PARQUET_TYPES``)."""
    return pa.Table.from_arrays([_array(c, frame.get(c.name, Fixed(None)), rows=rows) for c in columns],
                                schema=schema)


def frame_of_rows(rows: Sequence[Mapping[str, Scalar]], columns: Sequence[Column]) -> Frame:
    """Rows of the row-by-row exporter (dicts of ``Decimal``, epoch seconds, strings) as a frame."""
    frame: Frame = {}
    for c in columns:
        values = [r.get(c.name) for r in rows]
        if c.type is ColumnType.DECIMAL:
            frame[c.name] = pa.array([units_of(v) for v in values], pa.int64())
        elif c.type is ColumnType.DATETIME:
            frame[c.name] = pa.array([None if v is None else int(v) for v in values], pa.int64())
        else:
            frame[c.name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    return frame
