"""Writers of FOCUS rows: CSV and Parquet, both from Arrow columns (``cells``), plus the metadata document
that travels beside an export. Without pyarrow (the ``focus`` extra) CSV is written row by row (``row_csv``)
and Parquet is refused.

Both writers take rows an hour at a time and keep nothing: the CSV writer writes through, the Parquet
writer turns each hour into one row group.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

from exporter.aggregator.focus.columns import PARQUET_SCALE, ColumnType, columns_for
from exporter.aggregator.focus.format import utc_text
from exporter.aggregator.focus.row_csv import RowCsvSink
from exporter.aggregator.focus.rows import METHOD_DOC, METHOD_ID, TAG_PREFIX, FocusSettings, Row

try:  # pyarrow, the ``focus`` extra: columns computed and written by Arrow, and Parquet
    from exporter.aggregator.focus.cells import PARQUET_TYPES, Frame, csv_text, frame_of_rows, parquet_table, quote_one
except ImportError:
    ARROW = False
else:
    ARROW = True


class CsvSink:
    """FOCUS CSV: header of the version's columns, nulls as empty unquoted fields; cells made by ``cells``."""

    def __init__(self, out: IO[str], version: str) -> None:
        self.columns = columns_for(version)
        self.csv = True  # frames may hold CSV cells made at once (``cells.Unquoted``)
        self._out = out
        out.write(",".join(quote_one(c.name) for c in self.columns) + "\n")
        self.rows = 0

    def write(self, rows: Sequence[Row]) -> None:
        """Append rows of the row-by-row exporter."""
        self.write_frame(frame_of_rows(rows, self.columns), rows=len(rows))

    def write_frame(self, frame: Frame, *, rows: int) -> None:
        """Append one hour's rows given as columns."""
        self._out.write(csv_text(frame, self.columns, rows=rows).decode("utf-8"))
        self.rows += rows

    def close(self) -> None:
        """Nothing buffered: the caller owns the stream."""


def csv_sink(out: IO[str], version: str) -> CsvSink | RowCsvSink:
    """The CSV writer this install has: Arrow's columns, else the standard library's rows (the same bytes)."""
    return CsvSink(out, version) if ARROW else RowCsvSink(out, version)


class ParquetSink:
    """FOCUS Parquet: decimal128 amounts, UTC timestamps, strings; one row group per hour written."""

    def __init__(self, out: str | IO[bytes], version: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.columns = columns_for(version)
        self.csv = False
        self.schema = pa.schema([pa.field(c.name, PARQUET_TYPES[c.type]) for c in self.columns])
        self._writer: Any = pq.ParquetWriter(out, self.schema, compression="snappy")
        self.rows = 0

    def write(self, rows: Sequence[Row]) -> None:
        """Append rows of the row-by-row exporter as one row group."""
        self.write_frame(frame_of_rows(rows, self.columns), rows=len(rows))

    def write_frame(self, frame: Frame, *, rows: int) -> None:
        """Append one hour's rows given as columns, as one row group."""
        if rows:
            self._writer.write_table(parquet_table(frame, self.columns, schema=self.schema, rows=rows))
            self.rows += rows

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
