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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from exporter.aggregator.focus.columns import PARQUET_SCALE, Column, ColumnType
from exporter.aggregator.focus.format import Scalar, utc_text

NANO_SCALE = 9  # the ledger's amounts: counts of 1e-9


def _stdlib_quotes() -> str:
    """The characters that make ``csv.writer`` (LF line ends) quote a cell on this Python (CR varies by version)."""
    out = io.StringIO()
    probes = (",", '"', "\r", "\n")
    csv.writer(out, lineterminator="\n").writerow([f"a{c}b" for c in probes])
    return "".join(c for c in probes if f'"a{c}' in out.getvalue())


_QUOTED_CHARS = _stdlib_quotes()
_NEEDS_QUOTES = "[" + _QUOTED_CHARS.replace("\r", r"\r").replace("\n", r"\n") + "]"  # an RE2 class
_SPECIAL = re.compile(rb'[,"\\\x00-\x1f]')  # what CSV quotes (CR, LF among the controls) or JSON escapes

Cell = Any  # a pa.Array of the hour's rows, or one Python value for all of them
Frame = dict[str, Cell]


@dataclass(frozen=True, slots=True)
class Unquoted:
    """A text column known to hold no character that CSV quotes (its parts were checked: ``plain_text``)."""

    values: pa.Array


def plain_text(*arrays: pa.Array) -> bool:
    """Whether no value of these text arrays holds a character that CSV quotes or JSON escapes: one scan of their
    data buffers (which may hold bytes outside the arrays too: then the answer is a safe "no")."""
    for arr in arrays:
        data = arr.buffers()[2]
        if data is not None and _SPECIAL.search(memoryview(data)):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Fixed:
    """One value for every row of a frame, in the column's frame representation (an amount as nano-units)."""

    value: int | str | None


def slice_frame(frame: Frame, *, start: int, length: int) -> Frame:
    """Rows ``start`` to ``start + length`` of a frame."""
    def part(cell: Cell) -> Cell:
        if isinstance(cell, Fixed):
            return cell
        return Unquoted(cell.values.slice(start, length)) if isinstance(cell, Unquoted) else cell.slice(start, length)

    return {k: part(v) for k, v in frame.items()}


def fixed_point(units: pa.Array, *, scale: int = NANO_SCALE) -> pa.Array:
    """Integer units (int64) as ``decimal128(38, scale)`` of the same unscaled value: 1500000000 -> 1.5."""
    wide = pc.cast(units, pa.decimal128(38, 0))
    return pa.Array.from_buffers(pa.decimal128(38, scale), len(wide), wide.buffers(), offset=wide.offset)


@lru_cache(maxsize=16384)
def units_text(units: int) -> str:
    """``format.decimal_text`` of ``units`` x 1e-9, from the integer: ``2.0``, ``0.25``, ``100.0``."""
    whole, part = divmod(abs(units), 10**NANO_SCALE)
    return f"{'-' if units < 0 else ''}{whole}.{f'{part:09d}'.rstrip('0') or '0'}"


def decimal_text(units: pa.Array) -> pa.Array:
    """Integer units of 1e-9 as ``format.decimal_text`` writes their decimal, each distinct value formatted once
    (``units_text``) and taken by index: a batch repeats its quantities, prices and costs."""
    encoded = pc.dictionary_encode(units)
    return pc.take(pa.array([units_text(v) for v in encoded.dictionary.to_pylist()], pa.string()), encoded.indices)


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
        return units_text(int(value))
    if column.type is ColumnType.DATETIME:
        return utc_text(int(value))
    return quote_one(str(value))


def csv_cells(column: Column, cell: Cell) -> Cell:
    """One column's CSV text: an array of cells, or one string for every row."""
    if isinstance(cell, Fixed):
        return _fixed_csv(column, cell.value)
    if isinstance(cell, Unquoted):
        return cell.values
    if column.type is ColumnType.DECIMAL:
        return decimal_text(cell)
    if column.type is ColumnType.DATETIME:  # a batch holds a few distinct hours: each is formatted once
        encoded = pc.dictionary_encode(cell)
        texts = pa.array([utc_text(t) for t in encoded.dictionary.to_pylist()], pa.string())
        return pc.take(texts, encoded.indices)
    return quote_csv(cell)


def csv_text(frame: Frame, columns: Sequence[Column], *, rows: int) -> bytes:
    """The frame's rows as CSV lines (each ending in LF), in the columns' order, UTF-8: the data buffer of the
    lines joined by Arrow (each line's last cell carries its LF, so the buffer is the text)."""
    if rows == 0:
        return b""
    cells: list[Any] = []
    for column in columns:
        cell = csv_cells(column, frame.get(column.name, Fixed(None)))
        if isinstance(cell, str) and cells and isinstance(cells[-1], str):
            cells[-1] += "," + cell  # neighbouring constants joined once, not once per row
        else:
            cells.append(cell)
    if not any(isinstance(c, pa.Array) for c in cells):
        return ((",".join(cells) + "\n") * rows).encode()
    if isinstance(cells[-1], str):
        cells[-1] += "\n"
    else:
        cells[-1] = pc.binary_join_element_wise(pc.fill_null(cells[-1], ""), "\n", "")
    lines = pc.binary_join_element_wise(*cells, ",", null_handling="replace", null_replacement="")
    offsets = lines.buffers()[1]
    first, last = (int.from_bytes(memoryview(offsets)[i * 4:i * 4 + 4], "little", signed=True)
                   for i in (lines.offset, lines.offset + rows))
    return memoryview(lines.buffers()[2])[first:last].tobytes()


PARQUET_TYPES: Mapping[ColumnType, pa.DataType] = {
    ColumnType.DECIMAL: pa.decimal128(38, PARQUET_SCALE),
    ColumnType.DATETIME: pa.timestamp("us", tz="UTC"),  # Parquet has no second unit
    ColumnType.STRING: pa.string(), ColumnType.JSON: pa.string()}


def _array(column: Column, cell: Cell, *, rows: int) -> pa.Array:
    if isinstance(cell, Unquoted):
        return cell.values
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
