"""Right-sizing evidence in the ledger: utilisation seconds per bucket and framebuffer peaks, per hour x device.

The utilisation distribution rides on the deltas booking already takes exactly once: each booked delta
of a holder adds its *measured* wall seconds to the bucket of its mean utilisation (``used / measured``).
One delta spans one pull interval, so the distribution has the pull cadence's resolution (a missed pull
averages two intervals). Framebuffer peaks are maxima: booking one twice changes nothing, so they are
taken from each admitted snapshot as they come, into the hour the agent measured them in.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.aggregator.books.rates import Slice
from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
from exporter.model.books import CounterMark
from exporter.model.devices import device_kind
from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.usage import HolderCounters


def _put(table: dict[EvidenceKey, EvidenceRow], key: EvidenceKey, *, row: EvidenceRow) -> None:
    old = table.get(key)
    table[key] = row if old is None else old.merge(row)


def book_evidence(table: dict[EvidenceKey, EvidenceRow], h: HolderCounters, *, d: CounterMark | None,
                  parts: Iterable[Slice], workload: str, node: str, model: str) -> None:
    """Add one holder's delta (spread over the hours like its usage) and its reported framebuffer peak.

    Each hour's seconds go straight into the row's histogram (one new tuple per hour part, not a one-bucket
    histogram merged in): this runs once per holder per tick."""
    kind = str(device_kind(h.device_id))
    profile = h.mig_profile or ""
    if d is not None and h.fraction > 0:
        measured = max(0.0, d.allocated_s - d.unmeasured_s)
        if measured > 0:
            util = min(1.0, d.used_s / measured)
            for part in parts:
                key = EvidenceKey(part.hour, h.namespace, h.pod, workload, node, model, profile, kind, h.device_id)
                old = table.get(key)
                wall = measured * part.share / h.fraction
                table[key] = (EvidenceRow(h.fraction, UtilHistogram.empty().add(util, wall), None) if old is None
                              else EvidenceRow(h.fraction, old.utilization.add(util, wall), old.fb_peak_bytes))
    if h.fb_peak_bytes is not None and h.fb_peak_hour is not None:
        key = EvidenceKey(h.fb_peak_hour, h.namespace, h.pod, workload, node, model, profile, kind, h.device_id)
        _put(table, key, row=EvidenceRow(h.fraction, UtilHistogram.empty(), h.fb_peak_bytes))
