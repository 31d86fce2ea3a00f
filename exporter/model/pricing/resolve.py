"""The price of one GPU-hour on a given node at a given time: pure lookups over validated documents.

Booking asks this once per (node, hour) and per MIG profile, so a compiled document caches every
answer by the node's facts; the facts are few (nodes * profiles), the lookups many.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from exporter.model.devices import mig_fraction
from exporter.model.pricing.labels import CapacityType, NodeFacts
from exporter.model.pricing.schema import Commitment, PricingDoc, epoch

HOURS_PER_YEAR = 8760.0  # 365 days: the convention of cloud list prices and straight-line depreciation
JOULES_PER_KWH = 3.6e6


class PriceSource(StrEnum):
    """Which rule set a GPU's effective price."""

    INSTANCE_TYPE = "instance_type"
    MODEL = "model"
    DEFAULT = "default"
    COMMITMENT = "commitment"
    ON_PREM = "on_prem"


@dataclass(frozen=True, slots=True)
class EnergyTariff:
    """What a joule costs on owned hardware: the electricity price, scaled by the site's PUE."""

    price_kwh: float
    pue: float

    def cost(self, joules: float) -> float:
        """Energy cost of ``joules`` measured at the device: kWh * price * PUE."""
        return joules / JOULES_PER_KWH * self.price_kwh * self.pue


@dataclass(frozen=True, slots=True)
class CarbonFactor:
    """What a joule measured at the device emits: the grid's intensity, scaled by the site's PUE."""

    g_per_kwh: float
    pue: float

    def grams(self, joules: float) -> float:
        """CO2e of ``joules`` measured at the device: kWh * PUE * intensity (grams)."""
        return joules / JOULES_PER_KWH * self.pue * self.g_per_kwh


@dataclass(frozen=True, slots=True)
class GpuRate:
    """Prices of one whole-GPU-equivalent hour on one node (a MIG instance pays its fraction of it).

    ``commitment_model`` names the model whose commitments may cover this GPU; None for spot
    capacity, owned GPUs and MIG instances with a listed instance price, which never take one.
    """

    list_per_gpu_hour: float
    effective_per_gpu_hour: float
    source: PriceSource
    capacity_type: CapacityType
    known: bool
    energy: EnergyTariff | None = None
    commitment_model: str | None = None
    carbon: CarbonFactor | None = None  # None: the document has no ``emissions:`` section


@dataclass(frozen=True, slots=True)
class ActiveCommitment:
    """A commitment and how many seconds of a given hour it was in force."""

    commitment: Commitment
    seconds: float


class PriceList:
    """One pricing document compiled for lookups."""

    def __init__(self, doc: PricingDoc) -> None:
        self.doc = doc
        self.currency = doc.currency
        self.effective_from = epoch(doc.effective_from) if doc.effective_from else None
        self._on_prem = {o.model: o for o in doc.on_prem}
        self._commitments = tuple((c, epoch(c.start), epoch(c.end)) for c in doc.commitments)
        self._cache: dict[tuple[NodeFacts, str | None], GpuRate] = {}

    def rate(self, node: NodeFacts, mig_profile: str | None = None) -> GpuRate:
        """List and pay-as-you-go price per GPU-equivalent hour of ``node`` (rules 1-3, 5, 6)."""
        key = (node, mig_profile or None)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._resolve(node, mig_profile or None)
        return cached

    def _resolve(self, node: NodeFacts, mig_profile: str | None) -> GpuRate:
        doc, model = self.doc, node.gpu_model
        owned = self._on_prem.get(model) if model is not None else None
        carbon = self._carbon(node, owned_pue=owned.pue if owned is not None else None)
        if owned is not None:  # owned hardware replaces list prices, multipliers and commitments
            capital = owned.capex_per_gpu / (owned.years * HOURS_PER_YEAR)
            return GpuRate(capital, capital, PriceSource.ON_PREM, node.capacity_type, known=True,
                           energy=EnergyTariff(owned.energy_price_kwh, owned.pue), carbon=carbon)
        listed, source = self._list_price(node)
        per_instance = doc.mig_profiles.get(model, {}).get(mig_profile) if model and mig_profile else None
        if per_instance is not None and model is not None and mig_profile is not None:
            listed, source = per_instance / mig_fraction(mig_profile, model), PriceSource.MODEL
        multiplier = doc.capacity_types.get(node.capacity_type, 1.0) * (doc.pools.get(node.pool, 1.0)
                                                                        if node.pool else 1.0)
        eligible = node.capacity_type is not CapacityType.SPOT and per_instance is None and model is not None
        return GpuRate(listed, listed * multiplier, source, node.capacity_type, known=source is not PriceSource.DEFAULT,
                       commitment_model=model if eligible else None, carbon=carbon)

    def _carbon(self, node: NodeFacts, *, owned_pue: float | None) -> CarbonFactor | None:
        """The pool's intensity (else the grid's) and the PUE: owned GPUs' own site PUE, else the section's."""
        section = self.doc.emissions
        if section is None:
            return None
        intensity = section.pools.get(node.pool, section.grid_g_per_kwh) if node.pool else section.grid_g_per_kwh
        return CarbonFactor(intensity, owned_pue if owned_pue is not None else section.pue)

    def _list_price(self, node: NodeFacts) -> tuple[float, PriceSource]:
        doc = self.doc
        instance = doc.instance_types.get(node.instance_type) if node.instance_type else None
        if instance is not None:
            return instance.hourly / instance.gpus, PriceSource.INSTANCE_TYPE
        if node.gpu_model is not None and node.gpu_model in doc.models:
            return doc.models[node.gpu_model], PriceSource.MODEL
        return doc.default_price, PriceSource.DEFAULT

    def active_commitments(self, start: float, end: float) -> list[ActiveCommitment]:
        """Commitments in force during ``[start, end)``, with the seconds of overlap (start ≤ t < end)."""
        out = []
        for commitment, c_start, c_end in self._commitments:
            seconds = min(end, c_end) - max(start, c_start)
            if seconds > 0:
                out.append(ActiveCommitment(commitment, seconds))
        return out


class PriceBook:
    """Every pricing document kept, by ``effective_from``: the past keeps the prices it was booked at."""

    def __init__(self, lists: Sequence[PriceList]) -> None:
        if not lists:
            raise ValueError("a price book needs at least one document")
        self.lists = tuple(sorted(lists, key=lambda p: p.effective_from or float("-inf")))
        self._starts = [p.effective_from or float("-inf") for p in self.lists]

    @property
    def newest(self) -> PriceList:
        """The document with the latest ``effective_from``."""
        return self.lists[-1]

    def at(self, ts: float) -> PriceList:
        """The document in force at ``ts``: the newest not after it (the oldest for earlier times)."""
        i = bisect.bisect_right(self._starts, ts) - 1
        return self.lists[max(i, 0)]

    def rate(self, node: NodeFacts, *, at: float, mig_profile: str | None = None) -> GpuRate:
        """The rate of ``node``'s GPUs for an interval starting at ``at``."""
        return self.at(at).rate(node, mig_profile)
