"""What one GPU-hour costs on each node now, per GPU model: the last tick's booked rates.

A node can carry GPUs of more than one model (each its own fleet entry, priced on its own), so the
prices are keyed by node *and* model: one ``gpucost_node_gpu_hourly_price`` series each, and the status
page weights each by its GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from exporter.aggregator.books.priced_rows import UNKNOWN
from exporter.aggregator.books.rates import FleetNode, TickRates
from exporter.model.pricing.resolve import GpuRate


class NodeModel(NamedTuple):
    """A node's GPUs of one model."""

    node: str
    gpu_model: str


@dataclass(frozen=True, slots=True)
class NodePrice:
    """What one GPU-hour of a node's model costs now (``gpucost_node_gpu_hourly_price``), and how many
    GPUs of that model the node has (the weight of its rate in a pool's)."""

    gpu_model: str
    rate: GpuRate
    gpus: int = 0


def node_prices(fleet: Iterable[FleetNode], *, rates: TickRates, at: float) -> dict[NodeModel, NodePrice]:
    """Every fleet entry's whole-GPU rate for an interval starting at ``at`` (commitments blended in)."""
    out: dict[NodeModel, NodePrice] = {}
    for entry in fleet:
        model = entry.facts.gpu_model or UNKNOWN
        out[NodeModel(entry.facts.name, model)] = NodePrice(
            model, rates.rate(entry.facts, mig_profile=None, at=at), entry.gpus)
    return out


@dataclass(slots=True)
class PoolRate:
    """GPU-weighted list and effective rates of a pool's GPUs: Σ gpus x rate and Σ gpus."""

    gpus: float = 0.0
    list_money: float = 0.0
    effective_money: float = 0.0

    @property
    def list_rate(self) -> float:
        """Mean list price of one of the pool's GPU-hours; 0 for a pool without GPUs."""
        return self.list_money / self.gpus if self.gpus > 0 else 0.0

    @property
    def effective_rate(self) -> float:
        """Mean effective price (commitments blended in) of one of the pool's GPU-hours; 0 for a pool without GPUs."""
        return self.effective_money / self.gpus if self.gpus > 0 else 0.0


def pool_rates(prices: Mapping[NodeModel, NodePrice], *, pool_of: Mapping[str, str]) -> dict[str, PoolRate]:
    """Per pool (``pool_of``: node -> pool; nodes not in it are left out), the GPU-weighted mean rates."""
    out: dict[str, PoolRate] = {}
    for key, price in prices.items():
        pool = pool_of.get(key.node)
        if pool is None or price.gpus <= 0:
            continue
        acc = out.setdefault(pool, PoolRate())
        acc.gpus += price.gpus
        acc.list_money += price.gpus * price.rate.list_per_gpu_hour
        acc.effective_money += price.gpus * price.rate.effective_per_gpu_hour
    return out
