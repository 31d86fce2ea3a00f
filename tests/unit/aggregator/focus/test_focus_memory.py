"""The export holds one batch of whole hours of rows at a time, so its memory does not grow with the window: the
tracemalloc peak of a 7-day export is about that of a 1-day export of the same cluster (the benchmark measures a
month of 500 nodes; this is the same property on a ledger small enough for every test run)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from exporter.aggregator.focus import export as focus_export
from exporter.aggregator.focus.export import export, open_readonly, query_of
from exporter.aggregator.focus.ledger_source import Window
from exporter.aggregator.focus.rows import FocusSettings
from exporter.aggregator.focus.writers import CsvSink
from exporter.aggregator.ledger.store import Ledger

START = 1793491200  # 2026-11-01T00:00:00Z
NODES = 10
PODS_PER_NODE = 3  # of 8 GPUs each: 5 unallocated per node and hour
# Peak(7 d) / peak(1 d). Streamed, it is 1 plus the bounded caches that fill as hours are seen (each hour's time
# texts, decimal texts of the amounts, SKU and tag texts; capped by their lru sizes): 1.5 measured with these
# sizes (0.50, 0.72, 0.92, 1.13 MB for 1, 7, 14, 28 days: the caches' growth, ~30 KB a day, not the rows').
# Holding every hour instead (the mutation ``list(focus_hours(...))``) measured 6.8, as 7 days hold 7x the rows
# of 1. 2.5 is far from both, so the check is deterministic although it measures memory; it does not measure time.
MAX_RATIO = 2.5


def _ledger(path: Path, days: int) -> None:
    """``days`` of ``NODES`` H100 nodes written with SQL into a ledger the real ``Ledger`` created (as the
    benchmark does: booking a week tick by tick would take minutes)."""

    async def create() -> None:
        ledger = Ledger(path)
        await ledger.open()
        await ledger.close()

    asyncio.run(create())
    model = "NVIDIA H100 80GB HBM3"
    conn = sqlite3.connect(path)
    with conn:
        for h in range(days * 24):
            hour = START + h * 3600
            conn.executemany(
                "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
                "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, "
                "idle_cost, energy_j, list_cost) VALUES (" + ",".join("?" * 21) + ")",
                [("default", hour, f"ns{p}", f"pod-{n}-{p}", f"wl-{p}", f"node-{n}", f"pool-{n % 3}", model, "", "",
                  "USD", "", "", 3600.0, 1800.0, 0.0, 1800.0, 4.0, 2.0, 1.0e6, 4.0)
                 for n in range(NODES) for p in range(PODS_PER_NODE)])
            idle = 8 - PODS_PER_NODE
            conn.executemany(
                "INSERT INTO unallocated (cluster, hour, node, pool, gpu_model, currency, seconds, cost, list_cost) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                [("default", hour, f"node-{n}", f"pool-{n % 3}", model, "USD", 3600.0 * idle, 4.0 * idle, 4.0 * idle)
                 for n in range(NODES)])
    conn.close()


def _peak(conn: sqlite3.Connection, days: int) -> tuple[int, int]:
    """tracemalloc peak (bytes) and rows of a CSV export of ``days`` from START, written to /dev/null."""
    with Path(os.devnull).open("w") as out:
        tracemalloc.start()
        try:
            rows = export(query_of(conn), CsvSink(out, "1.3"), settings=FocusSettings(),
                          window=Window(START, START + days * 86400))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak, rows


def test_memory_of_a_week_is_that_of_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of whole hours of about 100 ledger rows here (4,000 in production, more than this ledger's day):
    the peak is one batch's, whatever the window."""
    monkeypatch.setattr(focus_export, "BATCH_ROWS", 100)
    path = tmp_path / "ledger.db"
    _ledger(path, days=7)
    conn = open_readonly(path)
    try:
        _peak(conn, 1)  # warm the caches (SKU ids, decimal texts) and imports, so both runs start alike
        day, day_rows = _peak(conn, 1)
        week, week_rows = _peak(conn, 7)
    finally:
        conn.close()
    per_hour = NODES * (PODS_PER_NODE + 1)  # 3 pods + 1 unallocated row per node
    assert (day_rows, week_rows) == (24 * per_hour, 7 * 24 * per_hour)  # 1920 and 13440 rows
    assert week / day < MAX_RATIO, (day, week)
