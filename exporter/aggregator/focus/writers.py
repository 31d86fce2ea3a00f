"""Writers of FOCUS rows: CSV (stdlib only) and Parquet (pyarrow, the optional ``focus`` extra), plus the
metadata document that travels beside an export.

Both writers take rows an hour at a time and keep nothing: the CSV writer writes through, the Parquet
writer turns each hour into one row group.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import IO, Any

from exporter.aggregator.focus.columns import Column, ColumnType, columns_for
from exporter.aggregator.focus.format import Scalar, decimal_text, utc_text
from exporter.aggregator.focus.rows import METHOD_DOC, METHOD_ID, TAG_PREFIX, FocusSettings, Row

PARQUET_SCALE = 18  # decimal128(38, 18): 20 integer digits, finer than any float the ledger holds


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


class CsvSink:
    """FOCUS CSV: header of the version's columns, nulls as empty unquoted fields."""

    def __init__(self, out: IO[str], version: str) -> None:
        self.columns = columns_for(version)
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

    def close(self) -> None:
        """Nothing buffered: the caller owns the stream."""


def parquet_available() -> bool:
    """Whether pyarrow is installed (the ``focus`` extra), so Parquet can be written."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


class ParquetSink:
    """FOCUS Parquet: decimal128 amounts, UTC timestamps, strings; one row group per hour written."""

    def __init__(self, out: str | IO[bytes], version: str) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError("Parquet needs pyarrow: pip install 'gpu-cost-exporter[focus]'") from None
        self._pa: Any = pa
        self.columns = columns_for(version)
        kinds = {ColumnType.DECIMAL: pa.decimal128(38, PARQUET_SCALE),
                 ColumnType.DATETIME: pa.timestamp("us", tz="UTC"),  # Parquet has no second unit
                 ColumnType.STRING: pa.string(), ColumnType.JSON: pa.string()}
        self.schema = pa.schema([pa.field(c.name, kinds[c.type]) for c in self.columns])
        self._writer: Any = pq.ParquetWriter(out, self.schema, compression="snappy")
        self.rows = 0

    def _value(self, column: Column, value: Scalar) -> Any:
        if value is None:
            return None
        if column.type is ColumnType.DATETIME:
            return datetime.fromtimestamp(int(value), UTC)
        if isinstance(value, Decimal):
            return value.quantize(Decimal(1).scaleb(-PARQUET_SCALE))
        return str(value)

    def write(self, rows: Sequence[Row]) -> None:
        """Append one hour's rows as one row group."""
        if not rows:
            return
        arrays = [self._pa.array([self._value(c, r.get(c.name)) for r in rows], type=self.schema.field(c.name).type)
                  for c in self.columns]
        self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self.schema))
        self.rows += len(rows)

    def close(self) -> None:
        """Write the Parquet footer; the file is unreadable until this runs."""
        self._writer.close()


def metadata(settings: FocusSettings, *, file_name: str, created: float, rows: int) -> str:
    """The metadata document beside an export: schema, FOCUS version, tag prefixes, the allocation method."""
    columns = columns_for(settings.version)
    doc = {
        "DataGenerator": {"DataGenerator": "gpu-cost-exporter"},
        "Schema": {
            "SchemaId": f"gpu-cost-exporter-focus-{settings.version}",
            "FocusVersion": settings.version,
            "CreationDate": utc_text(created),
            "ColumnDefinition": [
                {"ColumnName": c.name, "DataType": c.type.value,
                 **({"ProviderTagPrefixes": [TAG_PREFIX]} if c.name in ("Tags", "AllocatedTags") else {}),
                 **({"NumericPrecision": 38, "NumberScale": PARQUET_SCALE} if c.type is ColumnType.DECIMAL else {})}
                for c in columns],
        },
        "ProviderTagPrefixes": [TAG_PREFIX],
        "AllocationMethods": [{"AllocatedMethodId": METHOD_ID, "Documentation": METHOD_DOC}],
        "Export": {"File": file_name, "Rows": rows, "SubAccountId": settings.cluster,
                   "BilledCost": settings.billed_cost, "HostProviderName": settings.host_provider or settings.provider,
                   "TeamTags": f"{TAG_PREFIX}team in AllocatedTags and x_Team: the namespace's team label as "
                               "booking saw it in each hour; null where it was not seen"},
    }
    return json.dumps(doc, indent=2) + "\n"
