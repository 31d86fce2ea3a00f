"""Committed-use contracts over one hour: how much of the fleet they cover, and what was paid for nothing.

A commitment is paid every hour of its term. Spreading it over the GPUs it could cover (coverage
blending) and booking the remainder on its own row means the hour's books add up to the invoice:
covered cost + unused cost = Σ committed GPUs * hourly rate, whatever the fleet did.

This is the hour-at-once evaluation of ``report --reprice``, which has only the ledger's hourly
GPU-seconds. Booking evaluates coverage per tick (``aggregator/books/rates.py``, the design's per-interval
rule); the two agree whenever the fleet holds still within each hour (docs/pricing.md, rule 4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from exporter.model.pricing.resolve import GpuRate, PriceList, PriceSource

SECONDS_PER_HOUR = 3600.0
UNUSED_COMMITMENT = "__unused_commitment__"


@dataclass(frozen=True, slots=True)
class EligibleSeconds:
    """GPU-seconds of one model in one pool, in one hour, that a commitment may cover.

    Count what takes the blended rate: held and unallocated GPU-seconds of non-spot, not owned
    GPUs, MIG instances by their fraction unless their profile has a listed instance price
    (``GpuRate.commitment_model`` is set exactly for those).
    """

    model: str
    pool: str
    gpu_seconds: float


@dataclass(frozen=True, slots=True)
class ModelCoverage:
    """How one model's active commitments met its eligible GPU-seconds in the hour."""

    model: str
    committed_gpu_seconds: float  # Σ committed GPUs * seconds each was in force
    eligible_gpu_seconds: float
    covered_gpu_seconds: float  # min(committed, eligible)
    coverage: float  # covered / eligible, 0 when nothing was eligible
    rate: float  # committed-GPU-second-weighted mean hourly rate

    @property
    def covered_cost(self) -> float:
        """What the covered GPU-seconds cost at the commitment rate."""
        return self.covered_gpu_seconds / SECONDS_PER_HOUR * self.rate


@dataclass(frozen=True, slots=True)
class PoolCoverage:
    """The covered part of one model's GPU-seconds in one pool (the same coverage in every pool)."""

    model: str
    pool: str
    eligible_gpu_seconds: float
    covered_gpu_seconds: float
    covered_cost: float


@dataclass(frozen=True, slots=True)
class UnusedCommitment:
    """The paid-for, unused part of one commitment in the hour: an ``__unused_commitment__`` row."""

    name: str
    model: str
    gpu_seconds: float
    cost: float


@dataclass(frozen=True, slots=True)
class CommitmentHour:
    """One hour's commitments, ready to blend each eligible GPU's rate."""

    hour_start: float
    models: Mapping[str, ModelCoverage]
    pools: tuple[PoolCoverage, ...]
    unused: tuple[UnusedCommitment, ...]

    def apply(self, rate: GpuRate) -> GpuRate:
        """The rate with coverage blended in: ``c * R + (1 - c) * E``; unchanged when not covered."""
        cover = self.models.get(rate.commitment_model) if rate.commitment_model else None
        if cover is None or cover.coverage <= 0:
            return rate
        blended = cover.coverage * cover.rate + (1 - cover.coverage) * rate.effective_per_gpu_hour
        return replace(rate, effective_per_gpu_hour=blended, source=PriceSource.COMMITMENT)

    @property
    def contract_cost(self) -> float:
        """What the commitments cost this hour: covered plus unused."""
        return sum(m.covered_cost for m in self.models.values()) + sum(u.cost for u in self.unused)


def commitment_hour(prices: PriceList, *, hour_start: float, eligible: Iterable[EligibleSeconds]) -> CommitmentHour:
    """Coverage and unused amounts of the commitments of ``prices`` in ``[hour_start, hour_start + 1 h)``.

    Several commitments of a model add up (their GPUs summed, their rate the GPU-weighted mean);
    the unused part is split among them by committed GPU-seconds, each at its own rate, which
    sums to exactly the unused GPU-seconds * the mean rate.
    """
    active = prices.active_commitments(hour_start, hour_start + SECONDS_PER_HOUR)
    by_pool: dict[tuple[str, str], float] = defaultdict(float)
    per_model: dict[str, float] = defaultdict(float)
    for e in eligible:
        if e.gpu_seconds > 0:
            by_pool[(e.model, e.pool)] += e.gpu_seconds
            per_model[e.model] += e.gpu_seconds
    committed: dict[str, float] = defaultdict(float)
    weighted: dict[str, float] = defaultdict(float)
    for a in active:
        gpu_seconds = a.commitment.gpus * a.seconds
        committed[a.commitment.model] += gpu_seconds
        weighted[a.commitment.model] += gpu_seconds * a.commitment.hourly
    models: dict[str, ModelCoverage] = {}
    for model, c_seconds in committed.items():
        s_seconds = per_model.get(model, 0.0)
        covered = min(c_seconds, s_seconds)
        models[model] = ModelCoverage(model, c_seconds, s_seconds, covered,
                                      covered / s_seconds if s_seconds > 0 else 0.0, weighted[model] / c_seconds)
    pools = tuple(
        PoolCoverage(model, pool, seconds, seconds * models[model].coverage,
                     seconds * models[model].coverage / SECONDS_PER_HOUR * models[model].rate)
        for (model, pool), seconds in sorted(by_pool.items()) if model in models)
    unused = []
    for a in active:
        cover = models[a.commitment.model]
        share = a.commitment.gpus * a.seconds / cover.committed_gpu_seconds
        idle = (cover.committed_gpu_seconds - cover.covered_gpu_seconds) * share
        if idle > 0:
            unused.append(UnusedCommitment(a.commitment.name, a.commitment.model, idle,
                                           idle / SECONDS_PER_HOUR * a.commitment.hourly))
    return CommitmentHour(hour_start, models, pools, tuple(unused))
