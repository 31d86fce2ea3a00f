"""The status page's pool table: GPUs, how much of them is held, and what a GPU-hour of the pool costs.

The rates are the ones booking used last tick (``Books.node_prices``: spot, pool multipliers and
commitments blended in), weighted by each node's GPUs of each model, beside the list rate they start
from, so the table shows where a pool's discount comes from without a query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from exporter.aggregator.books.node_prices import NodeModel, NodePrice, pool_rates
from exporter.aggregator.kube.state import KubeState
from exporter.model.usage import UsageSnapshot

NO_POOL = "(no pool)"
HEAD = ["pool", "GPUs", "held", "unallocated", "effective per GPU-hour", "list per GPU-hour"]


@dataclass(slots=True)
class PoolHeld:
    """A pool's physical GPUs and how much of them is held now."""

    gpus: float = 0.0
    held: float = 0.0


def bar(value: float, limit: float, *, width: int = 120) -> str:
    """A small inline SVG bar: value against limit (red when over 90 %)."""
    if limit <= 0:
        return ""
    frac = max(0.0, min(1.0, value / limit))
    color = "#b3261e" if frac >= 0.9 else "#2f6fde"
    return (f'<svg class="bar" width="{width}" height="10" role="img" aria-label="{frac:.0%}">'
            f'<rect width="{width}" height="10" fill="#e3e7ef"/><rect width="{frac * width:.1f}" height="10" '
            f'fill="{color}"/></svg>')


def _rate(v: float | None, currency: str) -> str:
    """Four decimals: a GPU-hour is a few units of money, and a spot or committed rate differs in the third."""
    return "" if v is None else f"{v:.4f} {escape(currency)}"


def pool_rows(latest: Mapping[str, UsageSnapshot], *, kube: KubeState, prices: Mapping[NodeModel, NodePrice],
              currency: str) -> list[str]:
    """One row per pool of the nodes whose agents reported: GPUs, held, unallocated, then the GPU-weighted
    effective and list rates of the pool's booked node prices (empty before the first booked tick)."""
    pool_of = {node: kube.pool_of(node) or NO_POOL for node in latest}
    pools: dict[str, PoolHeld] = {}
    for node, snap in latest.items():
        acc = pools.setdefault(pool_of[node], PoolHeld())
        acc.gpus += len(snap.capacity)
        acc.held += sum(c.held_fraction for c in snap.capacity)
    rates = pool_rates(prices, pool_of=pool_of)
    rows = []
    for pool, ph in sorted(pools.items()):
        r = rates.get(pool)
        rows.append(f"<tr><td>{escape(pool)}</td><td>{ph.gpus:g}</td><td>{ph.held:.2f} {bar(ph.held, ph.gpus)}</td>"
                    f"<td>{max(0.0, ph.gpus - ph.held):.2f}</td>"
                    f"<td>{_rate(r.effective_rate if r else None, currency)}</td>"
                    f"<td>{_rate(r.list_rate if r else None, currency)}</td></tr>")
    return rows
