"""The pricing document's shape and its rules, so a bad file is refused at start with file and field.

Version 1 (``currency``, ``default_price``, ``models``, ``mig_profiles``, ``pools``) keeps exactly
its old rules, zero prices included, so no file that loaded before stops loading. A document that
uses any version-2 key is a version-2 document, and there every price and multiplier must be > 0.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from exporter.model.devices import mig_fraction
from exporter.model.pricing.labels import CapacityType

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
V2_KEYS = ("instance_types", "capacity_types", "commitments", "on_prem", "effective_from")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InstanceType(_Strict):
    """A cloud instance type: the whole instance's hourly price, shared by its GPUs."""

    gpus: int = Field(ge=1)
    hourly: Positive


class Commitment(_Strict):
    """Contracted GPUs of one model, paid every hour of ``[start, end)`` whether used or not."""

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    gpus: int = Field(ge=1)
    hourly: Positive = Field(description="price per committed GPU-hour")
    start: AwareDatetime
    end: AwareDatetime


class OnPrem(_Strict):
    """Owned GPUs of one model: capital spread over their life, plus the electricity they draw."""

    model: str = Field(min_length=1)
    capex_per_gpu: Positive
    years: Positive
    energy_price_kwh: NonNegative
    pue: float = Field(ge=1, allow_inf_nan=False)


class Emissions(_Strict):
    """Grid carbon intensity: what a measured joule emits, so GPU time can be reported in CO2e as well as money."""

    grid_g_per_kwh: NonNegative = Field(description="location-based grid intensity, grams CO2e per kWh")
    pue: float = Field(default=1.0, ge=1, allow_inf_nan=False, description="facility overhead of rented GPUs")
    pools: dict[str, NonNegative] = Field(default_factory=dict, description="intensity by node pool (g/kWh)")


class PricingDoc(_Strict):
    """One validated pricing document (version 1 or 2)."""

    currency: str = Field(default="USD", min_length=1, max_length=16)
    default_price: float = Field(gt=0, description="price of one GPU-hour of an unlisted model")
    models: dict[str, float] = Field(default_factory=dict)
    mig_profiles: dict[str, dict[str, float]] = Field(default_factory=dict)
    pools: dict[str, float] = Field(default_factory=dict)
    instance_types: dict[str, InstanceType] = Field(default_factory=dict)
    capacity_types: dict[CapacityType, Positive] = Field(default_factory=dict)
    commitments: list[Commitment] = Field(default_factory=list)
    on_prem: list[OnPrem] = Field(default_factory=list)
    effective_from: AwareDatetime | None = None
    emissions: Emissions | None = None  # optional: without it no CO2e is reported

    @field_validator("default_price")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("models", "pools")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        for key, price in v.items():
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"{key!r} must be a finite number >= 0, got {price}")
        return v

    @field_validator("mig_profiles")
    @classmethod
    def _profiles(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for model, table in v.items():
            for profile, price in table.items():
                if not math.isfinite(price) or price < 0:
                    raise ValueError(f"{model!r}/{profile!r} must be a finite number >= 0, got {price}")
                mig_fraction(profile, model)  # raises ValueError on a bad profile name
        return v

    @property
    def is_v2(self) -> bool:
        """Whether the document uses anything beyond version 1 (then the stricter rules apply)."""
        return any(name in self.model_fields_set for name in V2_KEYS)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``('commitments', 0, 'gpus')`` -> ``commitments[0].gpus``; odd keys quoted: ``models["A 1"]``."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(document)"


def rule_violations(doc: PricingDoc) -> list[tuple[str, str]]:
    """Cross-field rules pydantic cannot state per field, as (field path, message), first offence first."""
    out: list[tuple[str, str]] = []
    if doc.is_v2:
        for key, value in doc.models.items():
            if value <= 0:
                out.append((field_path(("models", key)), "must be > 0 in a version-2 document"))
        for key, value in doc.pools.items():
            if value <= 0:
                out.append((field_path(("pools", key)), "must be > 0 in a version-2 document"))
        for model, table in doc.mig_profiles.items():
            for profile, value in table.items():
                if value <= 0:
                    out.append((field_path(("mig_profiles", model, profile)), "must be > 0 in a version-2 document"))
    names: set[str] = set()
    owned = {o.model for o in doc.on_prem}
    for i, c in enumerate(doc.commitments):
        if c.end <= c.start:
            out.append((f"commitments[{i}].end", f"must be after start ({c.start.isoformat()})"))
        if c.name in names:
            out.append((f"commitments[{i}].name", f"duplicate commitment name {c.name!r}"))
        names.add(c.name)
        if c.model in owned:
            out.append((f"commitments[{i}].model", f"{c.model!r} is also under on_prem: owned GPUs take no commitment"))
    seen: set[str] = set()
    for i, o in enumerate(doc.on_prem):
        if o.model in seen:
            out.append((f"on_prem[{i}].model", f"duplicate on_prem model {o.model!r}"))
        seen.add(o.model)
    return out


def epoch(moment: datetime) -> float:
    """Seconds since the Unix epoch of an aware datetime (the ledger's time base)."""
    return moment.timestamp()
