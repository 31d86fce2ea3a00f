"""FOCUS CSV row by row with the standard library: what an export writes when pyarrow is not installed (the
``focus`` extra; the aggregator's image leaves it out). The same bytes as the columnar writer
(``writers.CsvSink``), held to the same golden files."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import IO, TYPE_CHECKING

from exporter.aggregator.focus.columns import ColumnType, columns_for
from exporter.aggregator.focus.format import Scalar, decimal_text, utc_text
from exporter.aggregator.focus.rows import Row

if TYPE_CHECKING:
    from exporter.aggregator.focus.cells import Frame


def _decimal_cell(value: Scalar) -> str:
    if type(value) is Decimal:
        return decimal_text(value)
    raise TypeError(f"expected a Decimal, got {value!r}")


def _time_cell(value: Scalar) -> str:
    if type(value) is int:
        return utc_text(value)
    raise TypeError(f"expected epoch seconds, got {value!r}")


_FORMAT: dict[ColumnType, Callable[[Scalar], str]] = {ColumnType.DECIMAL: _decimal_cell,
                                                      ColumnType.DATETIME: _time_cell}


class RowCsvSink:
    """FOCUS CSV: header of the version's columns, nulls as empty unquoted fields; takes rows only."""

    def __init__(self, out: IO[str], version: str) -> None:
        self.columns = columns_for(version)
        self.csv = True
        self._writer = csv.writer(out, lineterminator="\n")
        self._writer.writerow([c.name for c in self.columns])
        self.rows = 0

    def write(self, rows: Iterable[Row]) -> None:
        """Nulls and strings go through as they are; decimals and times through their column's formatter."""
        plan = tuple((c.name, _FORMAT.get(c.type)) for c in self.columns)
        writerow = self._writer.writerow
        for row in rows:
            get = row.get
            writerow([v if (v := get(n)) is None or f is None else f(v) for n, f in plan])
            self.rows += 1

    def write_frame(self, frame: Frame, *, rows: int) -> None:
        """Frames are Arrow's: an export without pyarrow makes none (``export.export`` goes row by row)."""
        raise TypeError("a frame of columns needs pyarrow; this writer takes rows")

    def close(self) -> None:
        """Nothing buffered: the caller owns the stream."""
