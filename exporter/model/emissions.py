"""Which booked rows' energy was not measured, when the agent counts it per node only.

The agent reports a node's GPU-seconds whose energy DCGM did not measure as one counter, not per holder.
A held or idle GPU always draws power, so a row with GPU time but no joules is one whose energy was not
measured: those rows take the node's unmeasured seconds first (scaled down if they hold more time than
was counted); what is left (a delta mixing measured and unmeasured ticks) is spread over the other rows
by their GPU time. Either way the rows' shares sum to the node's count, so nothing is lost or invented.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class RowEnergy:
    """One booked row's delta: its GPU-seconds and the joules measured on them."""

    seconds: float
    energy_j: float


def split_unmeasured(gap_s: float, rows: Mapping[K, RowEnergy]) -> dict[K, float]:
    """The node's ``gap_s`` unmeasured GPU-seconds per row, each at most the row's seconds; rows given none are
    left out."""
    if gap_s <= 0:
        return {}
    dark = {k: r.seconds for k, r in rows.items() if r.seconds > 0 and r.energy_j <= 0}
    lit = {k: r.seconds for k, r in rows.items() if r.seconds > 0 and r.energy_j > 0}
    dark_total, lit_total = sum(dark.values()), sum(lit.values())
    take = min(1.0, gap_s / dark_total) if dark_total > 0 else 0.0
    out = {k: s * take for k, s in dark.items()}
    rest = gap_s - sum(out.values())
    if rest > 0 and lit_total > 0:
        spread = min(1.0, rest / lit_total)
        out.update({k: s * spread for k, s in lit.items()})
    return out
