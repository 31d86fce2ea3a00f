"""A FOCUS export of a ledger window, hour by hour: the one loop the CLI and ``/api/v1/focus`` share."""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from exporter.aggregator.focus.amounts import CostCarry
from exporter.aggregator.focus.ledger_open import open_sqlite
from exporter.aggregator.focus.ledger_source import (
    LedgerLayout,
    Window,
    inspect_ledger,
    read_capacity,
    read_capacity_types,
    read_teams,
    read_teams_of_hours,
    read_unused_commitments,
    read_usage,
    window_hours,
)
from exporter.aggregator.focus.rows import FocusSettings, Row, hour_rows, unused_commitment_row
from exporter.aggregator.ledger.report import Query
from exporter.aggregator.ledger.sqlite import decoded_rows

try:  # pyarrow, the ``focus`` extra: without it every hour goes row by row (the same bytes, more CPU)
    from exporter.aggregator.focus.cells import Frame, slice_frame
    from exporter.aggregator.focus.columnar import NotIntegerUnits, amounts, read_batch
    from exporter.aggregator.focus.frame import batch_frame
except ImportError:
    ARROW = False
else:
    ARROW = True


class Sink(Protocol):
    """Where an export's rows go (CSV, Parquet), an hour at a time; ``rows`` counts them."""

    rows: int
    csv: bool  # a CSV file: its frames may hold cells already quoted (``frame.batch_frame``)

    def write(self, rows: list[Row]) -> None:
        """Append one hour's rows."""

    def write_frame(self, frame: Frame, *, rows: int) -> None:
        """Append one hour's rows given as columns (``cells``)."""

    def close(self) -> None:
        """Finish the output (a Parquet footer); nothing is written after it."""


def rows_of_hour(query: Query, layout: LedgerLayout, *, hour: int, settings: FocusSettings,
                 carry: CostCarry | None = None, capacity_types: dict[str, str] | None = None) -> list[Row]:
    """Every FOCUS row of one hour of the ledger; ``carry`` the export's rounding of booked costs (one per
    export, so Σ EffectiveCost over the window is the books' total); ``capacity_types`` the nodes' (read once
    per export: ``read_capacity_types``)."""
    return hour_rows(read_usage(query, layout, hour=hour), read_capacity(query, layout, hour=hour), s=settings,
                     unused=read_unused_commitments(query, layout, hour=hour),
                     teams=read_teams(query, layout, hour=hour), carry=carry,
                     capacity_types=read_capacity_types(query, layout) if capacity_types is None else capacity_types)


def focus_hours(query: Query, settings: FocusSettings, *, window: Window,
                dialect: str = "sqlite") -> Iterator[list[Row]]:
    """The rows of each hour of the window, in hour order; only one hour is held at a time."""
    layout = inspect_ledger(query, cluster=settings.cluster, dialect=dialect)
    carry = CostCarry()
    kinds = read_capacity_types(query, layout)
    for hour in window_hours(query, layout, window=window):
        yield rows_of_hour(query, layout, hour=hour, settings=settings, carry=carry, capacity_types=kinds)


BATCH_ROWS = 4_000  # ledger rows computed and written as one batch of columns: bounds an export's memory


class _Batches:
    """Batches of consecutive whole hours of about ``BATCH_ROWS`` ledger rows, sized by the last batch's rows per
    hour (the first is one hour)."""

    def __init__(self, hours: list[int]) -> None:
        self.hours, self.at, self.size = hours, 0, 1

    def next(self) -> list[int]:
        out = self.hours[self.at:self.at + self.size]
        self.at += len(out)
        return out

    def done(self, *, hours: int, rows: int) -> None:
        self.size = max(1, BATCH_ROWS * hours // max(rows, 1))


def export(query: Query, sink: Sink, *, settings: FocusSettings, window: Window, dialect: str = "sqlite") -> int:
    """Write the window into ``sink`` as columns (``columnar``, ``frame``), in batches of whole hours of about
    ``BATCH_ROWS`` ledger rows; returns the number of rows. A SQLite file from before exact amounts (REAL
    columns, never opened by a newer aggregator), or an install without pyarrow, goes row by row."""
    if not ARROW:
        for rows_of_one_hour in focus_hours(query, settings, window=window, dialect=dialect):
            sink.write(rows_of_one_hour)
        return sink.rows
    layout = inspect_ledger(query, cluster=settings.cluster, dialect=dialect)
    carry = CostCarry()
    kinds = read_capacity_types(query, layout)
    batches = _Batches(window_hours(query, layout, window=window))
    while hours := batches.next():
        try:
            table = read_batch(query, layout, first=hours[0], last=hours[-1], dialect=dialect)
        except NotIntegerUnits:
            for hour in hours:
                sink.write(rows_of_hour(query, layout, hour=hour, settings=settings, carry=carry, capacity_types=kinds))
            continue
        rows = 0 if table is None else table.num_rows
        batches.done(hours=len(hours), rows=rows)
        unused = read_unused_commitments(query, layout, hour=hours[0], last=hours[-1])
        teams = read_teams_of_hours(query, layout, first=hours[0], last=hours[-1])
        frame = {} if table is None else batch_frame(table, amounts(table), s=settings, capacity_types=kinds,
                                                      teams=teams, csv=sink.csv)
        if not unused:
            sink.write_frame(frame, rows=rows)
            continue
        by_hour = [0] if table is None else table.column("hour").to_pylist()
        at = 0
        for hour in hours:  # each hour's unused commitments after its other rows
            end = bisect_right(by_hour, hour, lo=at) if rows else 0
            sink.write_frame(slice_frame(frame, start=at, length=end - at), rows=end - at)
            at = end
            sink.write([unused_commitment_row(c, settings, carry=carry) for c in unused if c.hour == hour])
    return sink.rows


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to a ledger file (WAL lets it read while the aggregator writes)."""
    return open_sqlite(path)


def query_of(conn: sqlite3.Connection) -> Query:
    """The ``Query`` of an open SQLite ledger."""
    return lambda sql, params: decoded_rows(conn.execute(sql, tuple(params)))
