"""Right-sizing evidence as the ledger keeps it: one row per hour x device with utilisation seconds per bucket
and the framebuffer peak, upserted so that seconds add up and peaks take the larger value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from exporter.aggregator.ledger.backend import Tx
from exporter.aggregator.ledger.schema import EVIDENCE_BUCKETS
from exporter.model.rightsizing.evidence import BUCKET_UPPER_PERCENT, UtilHistogram

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
