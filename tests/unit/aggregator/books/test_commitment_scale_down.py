"""Where booking and ``report --reprice`` part ways: coverage per tick (booking, the per-interval rule of the
design) against coverage per hour (the what-if, which only has the hour's GPU-seconds), on an hour in which
the fleet shrinks. Both numbers are pinned so the difference stays known."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.advice.reprice import reprice
from exporter.aggregator.books.booking import Books, NodeGone
from exporter.aggregator.ledger.report import UNALLOCATED, UNUSED_COMMITMENT, Query, build_report
from exporter.aggregator.ledger.store import Ledger
from exporter.model.usage import GpuCapacity, UnallocatedCounter, UsageSnapshot
from tests.unit.aggregator.books.pricing_books import COMMITTED, H100, T0, cluster


def _idle(node: str, seq: int, t: float) -> UsageSnapshot:
    """8 H100s nobody holds, ``t`` seconds into the hour: 8 x t unallocated GPU-seconds so far."""
    return UsageSnapshot(node=node, epoch="e1", timestamp=T0 + t, seq=seq, started_at=T0,
                         unallocated=[UnallocatedCounter(gpu_model=H100, seconds=8 * t)],
                         capacity=[GpuCapacity(gpu_uuid=f"{node}-{i}", gpu_model=H100) for i in range(8)])


async def test_scale_down_hour_booked_per_tick_and_repriced_per_hour(tmp_path: Path) -> None:
    """12 H100s committed at 2.10, list 4.00; 16 on-demand H100s for 30 min, then 8 (node b deleted).

    Booked, per tick: first half n = 16, c = 12/16 = 0.75, 0.75 x 2.10 + 0.25 x 4.00 = 2.575 per GPU-hour
    x 8 GPU-h = 20.60; second half n = 8, c = 1: 4 GPU-h x 2.10 = 8.40, and 4 committed GPUs unused for
    0.5 h: 2 GPU-h x 2.10 = 4.20. Total 20.60 + 8.40 + 4.20 = 33.20 = 12 x 2.10 (the commitment's
    invoice line, 25.20) + 4 GPUs x 0.5 h x 4.00 (the 4 past the commitment for half an hour, 8.00).

    Repriced, per hour: n = (16 x 1800 + 8 x 1800) / 3600 = 12 GPU-h against 12 committed GPU-h, c = 1:
    12 GPU-h x 2.10 = 25.20, nothing unused. The hourly rule misses the 8.00 of pay-as-you-go time."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    k, books = cluster(a={}, b={}), Books(await ledger.load_state())
    ticks: list[tuple[list[UsageSnapshot], list[NodeGone], float]] = [
        ([_idle("a", 1, 0), _idle("b", 1, 0)], [], 0),
        ([_idle("a", 2, 1800), _idle("b", 2, 1800)], [], 1800),
        ([_idle("a", 3, 3600)], [NodeGone("b", T0 + 1800, 8, H100)], 3600)]
    try:
        for snaps, gone, t in ticks:
            p = books.prepare(snaps, k, pricing=COMMITTED, gone=gone, now=T0 + t)
            await ledger.commit(p.write)
            books.apply(p)

        def both(query: Query) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            rows = build_report(query, "namespace", since=None, until=None)
            again = build_report(query, "namespace", since=None, until=None)
            return rows, reprice(query, again, by="namespace", since=None, until=None, pricing=COMMITTED)
        booked, repriced = await ledger.read(both)
    finally:
        await ledger.close()
    by_name = {r["namespace"]: r for r in booked}
    assert by_name[UNALLOCATED]["cost"] == Decimal("29.00")  # 20.60 + 8.40 = 29.00
    assert by_name[UNUSED_COMMITMENT]["cost"] == Decimal("4.20")  # 4.20
    assert sum(r["cost"] for r in booked) == Decimal("33.20")
    assert sum(r["cost"] for r in booked) == Decimal("25.20") + Decimal("8.00")  # the invoice line + PAYG
    hourly = {r["namespace"]: r["reprice_cost"] for r in repriced}
    assert hourly[UNALLOCATED] == pytest.approx(12 * 2.10)  # 25.20
    assert hourly.get(UNUSED_COMMITMENT, 0.0) == 0.0
    assert sum(hourly.values()) == pytest.approx(25.20)
