"""Priced rows: GPU-seconds of one node turned into the ledger's hour-rows, each hour at its own rate.

Every amount carries two costs: ``cost`` at the effective rate (capacity type, pool, commitments, owned
hardware's capital rate plus its measured energy) and ``list_cost`` at the public list price.

Amounts are booked in fixed point (``model.exact``): a counter's delta is read by its decimal repr, rounded
once to 9 digits (energy to 3) and split over its hours so the hour-rows sum exactly to it; each hour-row's
money is rounded once from its booked seconds and that hour's rate. Sums after that are exact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from decimal import Decimal
from typing import TypeVar

from exporter.aggregator.books.rates import Slice, TickRates, slices
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import TickWrite
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
from exporter.model.emissions import RowEnergy, split_unmeasured
from exporter.model.exact import ENERGY_PLACES, EXACT, ZERO, arrived, book, div, exact, mul, split
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import JOULES_PER_KWH, EnergyTariff, GpuRate
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


def money(seconds: Decimal, per_gpu_hour: float) -> Decimal:
    """Booked money for ``seconds`` (booked GPU-seconds) at ``per_gpu_hour``: rounded once, half-even, to 9 digits."""
    return book(div(mul(seconds, exact(per_gpu_hour)), Decimal(3600)))


def energy_money(tariff: EnergyTariff | None, joules: Decimal) -> Decimal:
    """The exact (not yet rounded) price of ``joules`` measured at the device: kWh x price x PUE; 0 without a
    tariff."""
    if tariff is None or not joules:
        return ZERO
    return div(mul(joules, exact(tariff.price_kwh), exact(tariff.pue)), exact(JOULES_PER_KWH))


def booked_parts(value: float, shares: Sequence[Decimal], *, places: int = 9) -> list[Decimal]:
    """A counter's delta (a float from the agent) booked once and split over its hours, parts summing to it."""
    whole = book(arrived(value), places=places)
    return [whole] if len(shares) == 1 else split(whole, shares, places=places)


def shares_of(parts: Sequence[Slice]) -> list[Decimal]:
    """The slices' shares of their interval as decimals (weights for ``split``)."""
    return [exact(p.share) for p in parts]


Span = tuple[CounterMark | None, CounterMark | None]  # a counter's marks before and after a delta


def priced_capacity(rates: TickRates, facts: NodeFacts, *, seconds: float, parts: list[Slice],
                    energy_j: float = 0.0, unmeasured_energy_s: float = 0.0,
                    span: Span | None = None) -> list[tuple[int, CapacityAmounts]]:
    """Capacity GPU-seconds (and the energy DCGM measured on them) spread over their hours, each hour priced
    at the rate in force at its start: energy costs only where that rate prices it (owned hardware), and
    emits CO2e where that document has an ``emissions:`` section.

    ``span``: the agent's capacity counter before and after (as in ``usage_amounts``): seconds, energy and money
    are booked as positions along it, so many ticks telescope to their total; None (time nobody observed, which
    has no counter): ``seconds`` booked as they are."""
    shares = shares_of(parts)
    delta = CounterMark(allocated_s=seconds, energy_j=energy_j)
    before = (span[0] if span else None) or CounterMark()
    after = (span[1] if span else None) or (before + delta if span and span[0] is not None else delta)
    at = book(arrived(before.allocated_s))
    secs_t = max(ZERO, book(arrived(after.allocated_s)) - at)
    joules_t = max(ZERO, book(arrived(after.energy_j), places=ENERGY_PLACES)
                   - book(arrived(before.energy_j), places=ENERGY_PLACES))
    secs = [secs_t] if len(shares) == 1 else split(secs_t, shares)
    joules = [joules_t] if len(shares) == 1 else split(joules_t, shares, places=ENERGY_PLACES)
    darks = booked_parts(unmeasured_energy_s, shares)
    out = []
    for part, s, j, dark in zip(parts, secs, joules, darks, strict=True):
        rate = rates.rate(facts, mig_profile=None, at=part.start)
        per_s = div(exact(rate.effective_per_gpu_hour), Decimal(3600))
        cost = _between(at, s, per_s=per_s) + book(energy_money(rate.energy, j))
        list_cost = _between(at, s, per_s=div(exact(rate.list_per_gpu_hour), Decimal(3600)))
        co2e_g, co2e_s = carbon_of(rate, joules=j, seconds=s, unmeasured_s=min(dark, s))
        out.append((part.hour, CapacityAmounts(seconds=s, cost=cost, list_cost=list_cost, energy_j=j,
                                               co2e_g=co2e_g, co2e_s=co2e_s, unmeasured_energy_s=min(dark, s))))
        at += s
    return out


def unmeasured_by_row(deltas: Mapping[str, CounterMark], *, gap_key: str) -> dict[str, float]:
    """The node's unmeasured-energy GPU-seconds (the delta under ``gap_key``) given to its rows (model.emissions)."""
    gap = deltas.get(gap_key)
    return split_unmeasured(gap.allocated_s if gap else 0.0, {
        k: RowEnergy(d.allocated_s, d.energy_j) for k, d in deltas.items() if k != gap_key})


def carbon_of(rate: GpuRate, *, joules: Decimal, seconds: Decimal, unmeasured_s: Decimal) -> tuple[Decimal, Decimal]:
    """(grams CO2e, GPU-seconds whose CO2e is known), grams rounded once to 9 digits: both 0 without an
    ``emissions:`` section or without measured joules, so an unknown amount is never mistaken for none."""
    if rate.carbon is None or not joules:  # a GPU always draws power: no joules is energy not measured
        return ZERO, ZERO
    grams = div(mul(joules, exact(rate.carbon.pue), exact(rate.carbon.g_per_kwh)), exact(JOULES_PER_KWH))
    return book(grams), max(ZERO, seconds - unmeasured_s)


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


def usage_amounts(d: CounterMark, *, parts: Sequence[Slice], rates: Sequence[GpuRate],
                  span: tuple[CounterMark | None, CounterMark | None] = (None, None),
                  unmeasured_energy_s: float = 0.0) -> list[UsageAmounts]:
    """A holder's delta booked over its hours (``parts``, each at its own rate): seconds and energy rounded
    once and split so the rows sum to the delta exactly; effective cost (plus energy on owned hardware), idle
    cost at the same effective rate, and the list cost.

    ``span``: the holder's counters before and after the delta (None: from 0, to ``d``). Seconds are booked as
    positions along them (the delta is booked(after) - booked(before)) and each row's money as the price of
    the position it ends at less the price of the one it starts at, each rounded once: the money of many
    ticks at one rate telescopes to the price of their total, not a sum of per-tick roundings. Split seconds
    (unpriced) and the node's unmeasured-energy seconds given to this holder (``unmeasured_energy_s``) are
    booked from the delta and split over the hours; CO2e is rounded once per row from its booked joules."""
    shares = shares_of(parts)
    before, after = span[0] or CounterMark(), span[1] or d
    if span[1] is None and span[0] is not None:  # a delta without its end: positions from ``before`` by ``d``
        after = before + d
    alloc_b, used_b, unmeasured_b = (book(arrived(v)) for v in (before.allocated_s, before.used_s,
                                                                 before.unmeasured_s))
    alloc_t, used_t, unmeasured_t = (max(ZERO, book(arrived(e)) - b) for e, b in (
        (after.allocated_s, alloc_b), (after.used_s, used_b), (after.unmeasured_s, unmeasured_b)))
    idle_t = max(ZERO, alloc_t - used_t - unmeasured_t)  # allocated that was measured and not used
    alloc_at = alloc_b  # position along the allocated counter
    idle_at = max(ZERO, alloc_b - used_b - unmeasured_b)  # and along the idle time

    def parts_of(whole: Decimal) -> list[Decimal]:
        return [whole] if len(shares) == 1 else split(whole, shares)

    energy_t = max(ZERO, book(arrived(after.energy_j), places=ENERGY_PLACES)
                   - book(arrived(before.energy_j), places=ENERGY_PLACES))  # positions too: joules telescope
    energy = [energy_t] if len(shares) == 1 else split(energy_t, shares, places=ENERGY_PLACES)
    splits = parts_of(max(ZERO, book(arrived(d.split_s))))
    darks = parts_of(book(arrived(unmeasured_energy_s)))
    out = []
    for rate, alloc, used, unmeasured, idle_s, joules, split_s, dark in zip(
            rates, parts_of(alloc_t), parts_of(used_t), parts_of(unmeasured_t), parts_of(idle_t), energy, splits,
            darks, strict=True):
        per_s = div(exact(rate.effective_per_gpu_hour), Decimal(3600))
        list_per_s = div(exact(rate.list_per_gpu_hour), Decimal(3600))
        out.append(UsageAmounts(
            allocated_s=alloc, used_s=used, unmeasured_s=unmeasured, idle_s=idle_s,
            cost=_between(alloc_at, alloc, per_s=per_s) + book(energy_money(rate.energy, joules)),
            idle_cost=_between(idle_at, idle_s, per_s=per_s), energy_j=joules,
            list_cost=_between(alloc_at, alloc, per_s=list_per_s), split_s=split_s, **_carbon(rate, joules=joules,
                                                                                             alloc=alloc, dark=dark)))
        alloc_at, idle_at = alloc_at + alloc, idle_at + idle_s
    return out


def _carbon(rate: GpuRate, *, joules: Decimal, alloc: Decimal, dark: Decimal) -> dict[str, Decimal]:
    """A usage row's CO2e fields: grams, the seconds they are known for, and the unmeasured-energy seconds."""
    dark = min(dark, alloc)  # booked from a float delta: never past the row's seconds booked as positions
    co2e_g, co2e_s = carbon_of(rate, joules=joules, seconds=alloc, unmeasured_s=dark)
    return {"co2e_g": co2e_g, "co2e_s": co2e_s, "unmeasured_energy_s": dark}


def _between(at: Decimal, seconds: Decimal, *, per_s: Decimal) -> Decimal:
    """The money of ``seconds`` from position ``at`` at ``per_s`` a second: the booked price of the end position
    less the booked price of the start (exact differences of values each rounded once)."""
    if not seconds:
        return ZERO
    return book(mul(EXACT.add(at, seconds), per_s)) - book(mul(at, per_s))


def holder_totals(d: CounterMark, total: UsageAmounts) -> tuple[BreakdownTotals, NamespaceTotals]:
    """A holder's delta in the running totals, all from its booked hour-rows (whose seconds sum exactly to
    its counters' booked deltas)."""
    return (BreakdownTotals(allocated_s=total.allocated_s, cost=total.cost),
            NamespaceTotals(allocated_s=total.allocated_s, used_s=total.used_s, unmeasured_s=total.unmeasured_s,
                            cost=total.cost, idle_cost=total.idle_cost, list_cost=total.list_cost,
                            energy_j=total.energy_j, split_s=total.split_s, co2e_g=total.co2e_g,
                            co2e_s=total.co2e_s, unmeasured_energy_s=total.unmeasured_energy_s))
