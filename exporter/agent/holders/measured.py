"""The split of a shared GPU's busy time among its holders by what each pod measurably used.

With every holder of a busy shared GPU measured (``exporters.per_pod``), its busy seconds are split in
proportion to the measured values, no holder above its allocation (an L4 time-sliced in two, pods at 60 %
and 10 %: 0.5 and 0.1 GPU-h per hour instead of 0.35 each). A holder without a value, or all values 0 while
the device is busy, falls back to the split by fraction for the whole device. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from exporter.agent.exporters.per_pod import PodKey
from exporter.agent.holders.assignment import Assignment
from exporter.model.accounting import Holding, Reading, Usage, charge_shared


def _as_split(rates: dict[str, Usage]) -> dict[str, Usage]:
    """The split by fraction of a busy device, its seconds counted as split."""
    for usage in rates.values():
        usage.split = usage.allocated
    return rates


@dataclass(frozen=True, slots=True)
class SharedHolder:
    """One holder of a shared GPU: its meter key, its pod and its fraction."""

    key: str
    pod: PodKey
    fraction: float


def measured_rates(holders: Sequence[SharedHolder], *, reading: Reading,
                   measured: Mapping[PodKey, float] | None) -> tuple[dict[str, Usage], bool]:
    """Per-second usage of a shared GPU's holders, and whether it was measured (False: split by fraction).

    A pod's measured value is shared among its own holders on this GPU by their fractions."""
    by_fraction = charge_shared([Holding(h.key, h.fraction) for h in holders], 1.0, reading=reading)
    util = reading.utilization
    if util is None or util <= 0:
        return by_fraction, False
    if not measured or any(h.pod not in measured for h in holders):
        return _as_split(by_fraction), False
    pod_fraction: dict[PodKey, float] = {}
    for h in holders:
        pod_fraction[h.pod] = pod_fraction.get(h.pod, 0.0) + h.fraction
    share = {h.key: measured[h.pod] * h.fraction / pod_fraction[h.pod] for h in holders if pod_fraction[h.pod] > 0}
    total = sum(share.values())
    if total <= 0:
        return _as_split(by_fraction), False
    out: dict[str, Usage] = {}
    for h in holders:
        usage = by_fraction[h.key]
        used = min(h.fraction, util * share.get(h.key, 0.0) / total)
        out[h.key] = Usage(allocated=usage.allocated, used=used, unmeasured=0.0, energy_j=usage.energy_j)
    return out, True


def shared_rates(members: Sequence[Assignment], reading: Reading, *,
                 measured: Mapping[PodKey, float] | None) -> tuple[dict[str, Usage], bool]:
    """``measured_rates`` for the assignments of one shared GPU, as the meter holds them."""
    return measured_rates([SharedHolder(a.holder_key, (a.namespace, a.pod), a.fraction) for a in members],
                          reading=reading, measured=measured)
