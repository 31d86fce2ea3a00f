"""A commitment's unused part, booked for every second of its term exactly once.

A commitment is paid whether or not GPUs were there to use it; the part the fleet could not use,
``max(0, N - n) x R`` per hour, goes on its own ``__unused_commitment__`` row so the books add up to the
invoice. Each commitment keeps a "booked until" mark in the ledger, advanced in the same transaction
as the rows: a restart or a repeated tick neither skips nor repeats a second.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.aggregator.books.priced_rows import money
from exporter.aggregator.books.rates import TickRates, slices
from exporter.aggregator.ledger.store import TickWrite
from exporter.model.books import CapacityAmounts, CommitmentKey, CommitmentTotalKey
from exporter.model.exact import arrived
from exporter.model.exact import book as booked
from exporter.model.pricing.schema import epoch

UNUSED_COMMITMENT = "__unused_commitment__"


def commitment_names(rates: TickRates) -> list[str]:
    """Every commitment named in any document kept, in a stable order."""
    return sorted({c.name for prices in rates.pricing.book.lists for c in prices.doc.commitments})


def book_unused(w: TickWrite, *, rates: TickRates, marks: Mapping[str, float], first: float, now: float) -> None:
    """Book each commitment's unused part from its mark (or ``first`` for a commitment never booked) to
    ``now``, against this tick's fleet, and advance its mark to ``now``.

    Within each hour the document in force at the slice's start decides the commitment's terms; the
    unused share of the committed GPUs is ``max(0, N - n) / N`` of all the model's commitments in force,
    each commitment at its own rate (so the parts sum to the unused GPU-hours x the mean rate)."""
    book, currency = rates.pricing.book, rates.pricing.currency
    for name in commitment_names(rates):
        since = marks.get(name, first)
        if now <= since:
            continue
        for part in slices(since, now):
            lo_slice, hi_slice = part.start, part.start + part.share * (now - since)
            prices = book.at(lo_slice)
            found = next((c for c in prices.doc.commitments if c.name == name), None)
            if found is None:
                continue
            lo, hi = max(lo_slice, epoch(found.start)), min(hi_slice, epoch(found.end))
            if hi <= lo:
                continue
            cover = rates.coverage(prices, lo).get(found.model)
            gpu_seconds = found.gpus * (hi - lo) * (cover.unused_share if cover else 1.0)
            if gpu_seconds <= 0:
                continue
            seconds = booked(arrived(gpu_seconds))
            amount = CapacityAmounts(seconds=seconds, cost=money(seconds, found.hourly))
            row, total = CommitmentKey(part.hour, name, found.model, currency), CommitmentTotalKey(
                name, found.model, currency)
            w.unused_commitment[row] = w.unused_commitment[row] + amount if row in w.unused_commitment else amount
            w.unused_commitment_totals[total] = (w.unused_commitment_totals[total] + amount
                                                 if total in w.unused_commitment_totals else amount)
        w.commitment_marks[name] = now
