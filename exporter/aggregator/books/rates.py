"""What one GPU-hour costs on each node during one tick: node labels, dated documents and commitments.

Booking asks for a rate per (node, model, MIG profile, moment); the answer is the document in force
at that moment (``effective_from``), the node's instance type, capacity type and pool, and, for GPUs a
commitment may cover, the coverage blended in.

Coverage is evaluated per tick over the fleet present that tick: ``n`` = the GPUs of the model that
can take the blended rate (non-spot, not owned, minus held MIG instances with a listed price) on every
node the aggregator knows, from each node's latest snapshot: the design's per-interval rule, so a fleet
that scales within an hour is billed as the invoice bills it. The unused part is booked for exactly the
seconds the same coverage was applied to (see ``commitment_books``). ``report --reprice`` only has the
ledger's hourly GPU-seconds and evaluates coverage per hour: the same whenever the fleet holds still
within each hour (docs/pricing.md, rule 4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from exporter.model.books import hour_of
from exporter.model.pricing.document import Pricing
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import GpuRate, PriceList, PriceSource
from exporter.model.pricing.schema import Commitment, epoch

HOUR = 3600


@dataclass(frozen=True, slots=True)
class Slice:
    """One hour's part of a booked interval: the hour, its share of the interval, and where it starts."""

    hour: int
    share: float
    start: float


def slices(start: float, end: float) -> list[Slice]:
    """Split ``[start, end]`` at hour boundaries; shares sum to 1 (an empty interval is one slice at ``end``)."""
    if not end > start:
        return [Slice(hour_of(end), 1.0, end)]
    out, t, span = [], start, end - start
    while t < end:
        nxt = min(end, hour_of(t) + HOUR)
        out.append(Slice(hour_of(t), (nxt - t) / span, t))
        t = nxt
    return out


@dataclass(slots=True)
class FleetNode:
    """A node's GPUs as its latest snapshot showed them, and the MIG instances held on them by profile."""

    facts: NodeFacts
    gpus: int
    held_mig: dict[str, float] = field(default_factory=dict)  # profile -> held fraction of whole GPUs


@dataclass(frozen=True, slots=True)
class Coverage:
    """How the commitments of one model met the fleet at one moment: ``c = min(N, n) / n``."""

    committed: float  # N: committed GPUs in force
    eligible: float  # n: GPUs present that can take the blended rate
    rate: float  # R: the N-weighted mean hourly rate

    @property
    def fraction(self) -> float:
        """``c``: the share of eligible GPUs the commitments cover, at most 1; 0 when no GPU is eligible."""
        return min(self.committed, self.eligible) / self.eligible if self.eligible > 0 else 0.0

    @property
    def unused_share(self) -> float:
        """The part of the committed GPUs nobody could use: ``max(0, N - n) / N``."""
        return max(0.0, self.committed - self.eligible) / self.committed if self.committed > 0 else 0.0


def in_force(prices: PriceList, at: float) -> list[Commitment]:
    """Commitments of ``prices`` in force at ``at`` (``start <= at < end``)."""
    return [c for c in prices.doc.commitments if epoch(c.start) <= at < epoch(c.end)]


class TickRates:
    """Rates for one tick, cached: the fleet, node facts and documents are fixed for the tick."""

    def __init__(self, pricing: Pricing, fleet: Iterable[FleetNode]) -> None:
        self.pricing = pricing
        self.fleet = tuple(fleet)
        self._coverage: dict[tuple[int, tuple[str, ...]], dict[str, Coverage]] = {}
        self._rates: dict[tuple[str, str, str | None, int, tuple[str, ...]], GpuRate] = {}
        self._moments: dict[float, tuple[PriceList, tuple[str, ...]]] = {}
        self._facts: dict[tuple[str, str], NodeFacts] = {}

    def facts_of(self, node: str, model: str, *, make: Callable[[], NodeFacts]) -> NodeFacts:
        """A node's billing facts for one model, made once per tick (labels hold still within a tick)."""
        found = self._facts.get((node, model))
        if found is None:
            found = self._facts[(node, model)] = make()
        return found

    def _moment(self, at: float) -> tuple[PriceList, tuple[str, ...]]:
        """The document and the commitments in force at ``at``; a tick asks for few distinct moments."""
        found = self._moments.get(at)
        if found is None:
            prices = self.pricing.book.at(at)
            found = self._moments[at] = (prices, tuple(sorted(c.name for c in in_force(prices, at))))
        return found

    def eligible(self, prices: PriceList, model: str) -> float:
        """``n``: GPUs of ``model`` in the fleet that would take the blended rate under ``prices``."""
        n = 0.0
        for node in self.fleet:
            if node.facts.gpu_model != model or prices.rate(node.facts).commitment_model != model:
                continue
            n += node.gpus - sum(frac for profile, frac in node.held_mig.items()
                                 if prices.rate(node.facts, profile).commitment_model is None)
        return max(0.0, n)

    def coverage(self, prices: PriceList, at: float) -> dict[str, Coverage]:
        """Per model, the commitments of ``prices`` in force at ``at`` against this tick's fleet."""
        active = in_force(prices, at)
        key = (id(prices), tuple(sorted(c.name for c in active)))
        found = self._coverage.get(key)
        if found is None:
            committed: dict[str, float] = {}
            weighted: dict[str, float] = {}
            for c in active:
                committed[c.model] = committed.get(c.model, 0.0) + c.gpus
                weighted[c.model] = weighted.get(c.model, 0.0) + c.gpus * c.hourly
            found = self._coverage[key] = {
                m: Coverage(n_committed, self.eligible(prices, m), weighted[m] / n_committed)
                for m, n_committed in committed.items()}
        return found

    def rate(self, facts: NodeFacts, *, mig_profile: str | None, at: float) -> GpuRate:
        """The rate of a whole-GPU-equivalent hour on ``facts``' node for an interval starting at ``at``."""
        prices, active = self._moment(at)
        key = (facts.name, facts.gpu_model or "", mig_profile, id(prices), active)
        found = self._rates.get(key)
        if found is None:
            found = prices.rate(facts, mig_profile)
            cover = self.coverage(prices, at).get(found.commitment_model or "") if found.commitment_model else None
            if cover is not None and cover.fraction > 0:
                blended = cover.fraction * cover.rate + (1 - cover.fraction) * found.effective_per_gpu_hour
                found = replace(found, effective_per_gpu_hour=blended, source=PriceSource.COMMITMENT)
            self._rates[key] = found
        return found


def fleet_node(facts: NodeFacts, gpus: int, *, held_mig: Iterable[tuple[str, float]]) -> FleetNode:
    """A fleet entry, summing the held fractions of each MIG profile."""
    node = FleetNode(facts, gpus)
    for profile, fraction in held_mig:
        node.held_mig[profile] = node.held_mig.get(profile, 0.0) + fraction
    return node
