"""Priced rows: GPU-seconds of one node turned into the ledger's hour-rows, each hour at its own rate.

Every amount carries two costs: ``cost`` at the effective rate (capacity type, pool, commitments, owned
hardware's capital rate plus its measured energy) and ``list_cost`` at the public list price.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import TypeVar

from exporter.aggregator.books.rates import Slice, TickRates, slices
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import TickWrite
from exporter.model.accounting import cost_of
from exporter.model.books import (
    BreakdownTotals,
    CapacityAmounts,
    CapacityKey,
    CapacityTotalKey,
    CounterMark,
    NamespaceTotals,
    UsageAmounts,
    _Amounts,
)
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import GpuRate
from exporter.model.usage import UsageSnapshot

UNKNOWN = "unknown"
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V", bound=_Amounts)


def add(table: dict[_K, _V], key: _K, *, amount: _V) -> None:
    """Add ``amount`` to ``table[key]`` field by field."""
    old = table.get(key)
    table[key] = amount if old is None else old + amount


def node_facts(kube: KubeState, node: str, *, model: str) -> NodeFacts:
    """What the node's labels say about its billing (instance type, capacity type, pool)."""
    return NodeFacts.from_labels(node, model, labels=kube.nodes.get(node, {}), pool=kube.pool_of(node))


def gpus_by_model(snap: UsageSnapshot, kube: KubeState) -> dict[str, int]:
    """Physical GPUs of the node: the agent's inventory, else the node's GPU-count label."""
    by_model: dict[str, int] = defaultdict(int)
    for c in snap.capacity:
        by_model[c.gpu_model] += 1
    labelled = kube.gpus_of_node(snap.node)
    if not by_model and labelled:
        by_model[kube.model_of_node(snap.node) or UNKNOWN] = labelled
    return dict(by_model)


def priced_capacity(rates: TickRates, facts: NodeFacts, *, seconds: float, parts: list[Slice],
                    energy_j: float = 0.0, unmeasured_energy_s: float = 0.0) -> list[tuple[int, CapacityAmounts]]:
    """Capacity GPU-seconds (and the energy DCGM measured on them) spread over their hours, each hour priced
    at the rate in force at its start: energy costs only where that rate prices it (owned hardware), and
    emits CO2e where that document has an ``emissions:`` section."""
    out = []
    for part in parts:
        rate = rates.rate(facts, mig_profile=None, at=part.start)
        s, joules = seconds * part.share, energy_j * part.share
        energy_cost = rate.energy.cost(joules) if rate.energy is not None else 0.0
        dark = unmeasured_energy_s * part.share
        co2e_g, co2e_s = carbon_of(rate, joules=joules, seconds=s, unmeasured_s=dark)
        out.append((part.hour, CapacityAmounts(seconds=s, cost=cost_of(s, rate.effective_per_gpu_hour) + energy_cost,
                                               list_cost=cost_of(s, rate.list_per_gpu_hour), energy_j=joules,
                                               co2e_g=co2e_g, co2e_s=co2e_s, unmeasured_energy_s=dark)))
    return out


def carbon_of(rate: GpuRate, *, joules: float, seconds: float, unmeasured_s: float) -> tuple[float, float]:
    """(grams CO2e, GPU-seconds whose CO2e is known): both 0 without an ``emissions:`` section, so an
    unknown amount is never mistaken for none."""
    if rate.carbon is None:
        return 0.0, 0.0
    return rate.carbon.grams(joules), max(0.0, seconds - unmeasured_s)


def book_capacity(w: TickWrite, *, unobserved: bool, key: CapacityTotalKey,
                  hourly: list[tuple[int, CapacityAmounts]]) -> None:
    """Book capacity time in the hours it happened in, and add it to the running totals."""
    rows = w.unobserved if unobserved else w.unallocated
    totals = w.unobserved_totals if unobserved else w.unallocated_totals
    for hour, amount in hourly:
        add(rows, CapacityKey(hour, *key), amount=amount)
        add(totals, key, amount=amount)


def book_unobserved(w: TickWrite, *, node: str, kube: KubeState, rates: TickRates, gpus_by_model: dict[str, int],
                    start: float, end: float) -> None:
    """``gpus x (end - start)`` of capacity nobody observed, per model, spread over its hours."""
    if end <= start:
        return
    parts, pool = slices(start, end), kube.pool_of(node)
    for model, gpus in gpus_by_model.items():
        seconds = gpus * (end - start)
        if seconds > 0:
            book_capacity(w, unobserved=True, key=CapacityTotalKey(node, pool, model, rates.pricing.currency),
                          hourly=priced_capacity(rates, node_facts(kube, node, model=model), seconds=seconds,
                                                 parts=parts, unmeasured_energy_s=seconds))


def usage_amount(d: CounterMark, *, idle: float, share: float, rate: GpuRate,
                 unmeasured_energy_s: float = 0.0) -> UsageAmounts:
    """One hour's part of a holder's delta, priced: effective cost (plus energy on owned hardware), idle
    cost at the same effective rate, the list cost, and the CO2e of its measured energy."""
    alloc, idle_s, energy = d.allocated_s * share, idle * share, d.energy_j * share
    energy_cost = rate.energy.cost(energy) if rate.energy is not None else 0.0
    dark = unmeasured_energy_s * share
    co2e_g, co2e_s = carbon_of(rate, joules=energy, seconds=alloc, unmeasured_s=dark)
    return UsageAmounts(allocated_s=alloc, used_s=d.used_s * share, unmeasured_s=d.unmeasured_s * share,
                        idle_s=idle_s, cost=cost_of(alloc, rate.effective_per_gpu_hour) + energy_cost,
                        idle_cost=cost_of(idle_s, rate.effective_per_gpu_hour), energy_j=energy,
                        list_cost=cost_of(alloc, rate.list_per_gpu_hour), split_s=d.split_s * share,
                        co2e_g=co2e_g, co2e_s=co2e_s, unmeasured_energy_s=dark)


def holder_totals(d: CounterMark, total: UsageAmounts) -> tuple[BreakdownTotals, NamespaceTotals]:
    """A holder's delta in the running totals: its time from its counters, its money and CO2e from its priced rows."""
    return (BreakdownTotals(allocated_s=d.allocated_s, cost=total.cost),
            NamespaceTotals(allocated_s=d.allocated_s, used_s=d.used_s, unmeasured_s=d.unmeasured_s, cost=total.cost,
                            idle_cost=total.idle_cost, list_cost=total.list_cost, energy_j=d.energy_j,
                            split_s=d.split_s, co2e_g=total.co2e_g, co2e_s=total.co2e_s,
                            unmeasured_energy_s=total.unmeasured_energy_s))
