"""Right-sizing evidence in the ledger: utilisation seconds per bucket and framebuffer peaks, per hour x device.

The utilisation distribution rides on the deltas booking already takes exactly once: each booked delta
of a holder adds its *measured* wall seconds to the bucket of its mean utilisation (``used / measured``).
One delta spans one pull interval, so the distribution has the pull cadence's resolution (a missed pull
averages two intervals). Framebuffer peaks are maxima: booking one twice changes nothing, so they are
taken from each admitted snapshot as they come, into the hour the agent measured them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from exporter.aggregator.ledger_backend import Tx
from exporter.aggregator.ledger_schema import EVIDENCE_BUCKETS
from exporter.aggregator.rates import Slice
from exporter.model.books import CounterMark
from exporter.model.devices import device_kind
from exporter.model.recommend_evidence import BUCKET_UPPER_PERCENT, UtilHistogram
from exporter.model.usage import HolderCounters

assert tuple(EVIDENCE_BUCKETS) == BUCKET_UPPER_PERCENT, "ledger columns and histogram buckets must agree"
BUCKET_COLUMNS = tuple(f"s_u{b:03d}" for b in EVIDENCE_BUCKETS)


class EvidenceKey(NamedTuple):
    """Where one evidence row is booked: one device of one pod in one hour."""

    hour: int
    namespace: str
    pod: str
    workload: str
    node: str
    gpu_model: str
    mig_profile: str
    device_kind: str
    device: str


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    """One device's hour: its GPU fraction, utilisation seconds per bucket, framebuffer peak (None: unmeasured)."""

    fraction: float
    utilization: UtilHistogram
    fb_peak_bytes: float | None

    def merge(self, other: EvidenceRow) -> EvidenceRow:
        """Two parts of one device's hour combined: utilisation seconds added, the higher framebuffer peak, the
        later fraction."""
        peaks = [p for p in (self.fb_peak_bytes, other.fb_peak_bytes) if p is not None]
        return EvidenceRow(other.fraction, self.utilization.merge(other.utilization), max(peaks) if peaks else None)


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

_PEAK = ("CASE WHEN evidence.fb_peak_bytes IS NULL THEN excluded.fb_peak_bytes "
         "WHEN excluded.fb_peak_bytes IS NULL OR evidence.fb_peak_bytes >= excluded.fb_peak_bytes "
         "THEN evidence.fb_peak_bytes ELSE excluded.fb_peak_bytes END")


def write_evidence(tx: Tx, rows: Mapping[EvidenceKey, EvidenceRow], *, cluster: str) -> None:
    """Upsert: bucket seconds add up, the framebuffer peak is the larger one, the fraction the latest."""
    if not rows:
        return
    cols = ("cluster", *EvidenceKey._fields, "fraction", *BUCKET_COLUMNS, "fb_peak_bytes")
    update = ", ".join(["fraction = excluded.fraction", *(f"{c} = evidence.{c} + excluded.{c}" for c in BUCKET_COLUMNS),
                        f"fb_peak_bytes = {_PEAK}"])
    tx.executemany(
        f"INSERT INTO evidence ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        f"ON CONFLICT (cluster, {', '.join(EvidenceKey._fields)}) DO UPDATE SET {update}",
        ((cluster, *k, r.fraction, *r.utilization.seconds, r.fb_peak_bytes)
         for k, r in rows.items()))
