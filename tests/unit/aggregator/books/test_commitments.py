"""A commitment's unused part booked once, across repeated snapshots and a restart from the ledger."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from exporter.aggregator.books.booking import Books
from exporter.aggregator.ledger.store import Ledger
from exporter.model.books import CommitmentTotalKey
from tests.unit.aggregator.books.pricing_books import COMMITTED, H100, T0, cluster, snap


async def test_unused_commitment_is_booked_once_across_repeats_and_restarts(tmp_path: Path) -> None:
    """12 committed, 8 present: 4 unused GPUs x 2.10 per hour. Ticks at +0, +1800, a repeated +1800
    (stale: books nothing), then a restart from the ledger and a tick at +3600: the unused part is
    4 x 3600 GPU-s = 8.40 in total, with the mark at +3600 - not 8.40 + a repeated half hour."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    k = cluster(od={})
    books = Books(await ledger.load_state())
    for seq, t in ((1, 0.0), (2, 1800.0), (2, 1800.0)):
        p = books.prepare([snap("od", seq, T0 + t, held=t)], k, pricing=COMMITTED, now=T0 + t)
        await ledger.commit(p.write)
        books.apply(p)
    await ledger.close()
    reopened = Ledger(tmp_path / "l.db")
    await reopened.open()
    state = await reopened.load_state()
    assert state.commitment_marks == {"h100-1yr": T0 + 1800}
    books = Books(state)
    p = books.prepare([snap("od", 3, T0 + 3600, held=3600.0)], k, pricing=COMMITTED, now=T0 + 3600)
    await reopened.commit(p.write)
    books.apply(p)
    rows = await reopened.query("SELECT SUM(seconds), SUM(cost) FROM unused_commitment")
    assert rows[0] == (4 * 3600, Decimal("8.40"))
    assert books.unused_commitment_totals[CommitmentTotalKey("h100-1yr", H100, "USD")].cost == Decimal("8.40")
    await reopened.close()
