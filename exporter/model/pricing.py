"""Prices of GPU time: per model, per MIG profile, per node pool, with a default.

The pricing file is YAML or JSON::

    currency: USD
    default_price: 1.00            # per GPU-hour, for models not listed (must be > 0)
    models: {"NVIDIA H100 80GB HBM3": 4.00}
    mig_profiles:                  # optional: price of one instance-hour, by model and profile
      "NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.45}
    pools: {spot: 0.4}             # optional multipliers by node pool

An unknown model is priced at ``default_price`` and reported (never priced at zero silently).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from exporter.model.devices import mig_fraction


class PricingError(ValueError):
    """An invalid pricing document; the message names the source and the field."""


class PricingDoc(BaseModel):
    """The validated pricing document."""

    model_config = ConfigDict(extra="forbid")

    currency: str = Field(default="USD", min_length=1, max_length=16)
    default_price: float = Field(gt=0, description="price of one GPU-hour of an unlisted model")
    models: dict[str, float] = Field(default_factory=dict)
    mig_profiles: dict[str, dict[str, float]] = Field(default_factory=dict)
    pools: dict[str, float] = Field(default_factory=dict)

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


@dataclass(frozen=True, slots=True)
class Price:
    """An hourly price of one whole-GPU-equivalent, and whether the model was listed."""

    per_gpu_hour: float
    known: bool


class Pricing:
    """Looks prices up; cheap enough to call per row."""

    def __init__(self, doc: PricingDoc) -> None:
        self.doc = doc
        self.currency = doc.currency

    def price(self, model: str | None, mig_profile: str | None = None, pool: str | None = None) -> Price:
        """Price of one whole-GPU-equivalent hour of ``model`` (MIG overrides scaled by fraction)."""
        doc = self.doc
        known = model is not None and model in doc.models
        base = doc.models[model] if known and model is not None else doc.default_price
        if model is not None and mig_profile:
            per_instance = doc.mig_profiles.get(model, {}).get(mig_profile)
            if per_instance is not None:
                base = per_instance / mig_fraction(mig_profile, model)
        multiplier = doc.pools.get(pool, 1.0) if pool else 1.0
        return Price(base * multiplier, known)


def parse_pricing(text: str, source: str) -> Pricing:
    """Parse and validate a pricing document; raises ``PricingError`` naming ``source`` and the field."""
    try:
        raw = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise PricingError(f"{source}: not valid YAML/JSON: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise PricingError(f"{source}: expected a mapping at the top level")
    try:
        return Pricing(PricingDoc.model_validate(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(document)"
        raise PricingError(f"{source}: field {loc}: {err['msg']}") from exc
