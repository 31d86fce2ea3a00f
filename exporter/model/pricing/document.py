"""Prices of GPU time: loading pricing documents (version 1 and 2) and the lookups booking uses today.

The pricing file is YAML or JSON; ``docs/pricing.md`` defines every key. Version 1::

    currency: USD
    default_price: 1.00            # per GPU-hour, for models not listed (must be > 0)
    models: {"NVIDIA H100 80GB HBM3": 4.00}
    mig_profiles:                  # optional: price of one instance-hour, by model and profile
      "NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.45}
    pools: {spot: 0.4}             # optional multipliers by node pool

Version 2 adds instance types, capacity types, commitments, owned hardware and ``effective_from``;
several documents may be kept under ``versions:`` (or as files in a directory) to change prices on a
date without re-pricing the past. An unknown model is priced at ``default_price`` and reported
(never priced at zero silently).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import yaml
from pydantic import ValidationError

from exporter.model.devices import mig_fraction
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import GpuRate, PriceBook, PriceList
from exporter.model.pricing.schema import PricingDoc, field_path, rule_violations

__all__ = ["Price", "Pricing", "PricingDoc", "PricingError", "SourcedDoc", "build_pricing", "parse_document",
           "parse_documents", "parse_pricing"]


class PricingError(ValueError):
    """An invalid pricing document; the message names the source and the field."""


@dataclass(frozen=True, slots=True)
class Price:
    """An hourly price of one whole-GPU-equivalent, and whether the model was listed."""

    per_gpu_hour: float
    known: bool


@dataclass(frozen=True, slots=True)
class SourcedDoc:
    """A validated document and where it came from (a file, or ``file: versions[i]``), for error lines."""

    doc: PricingDoc
    source: str
    prefix: str = ""


class Pricing:
    """All documents of a pricing file; cheap enough to call per row."""

    def __init__(self, book: PriceBook | PricingDoc) -> None:
        self.book = book if isinstance(book, PriceBook) else PriceBook([PriceList(book)])
        self.doc = self.book.newest.doc
        self.currency = self.doc.currency

    def price(self, model: str | None, mig_profile: str | None = None, *, pool: str | None = None,
              at: float | None = None) -> Price:
        """Version-1 lookup: ``model`` (MIG overrides scaled by fraction) * pool multiplier.

        Instance types, capacity types, commitments and owned hardware need the node's facts: use
        :meth:`rate`. Without ``at`` the newest document answers.
        """
        doc = self.doc if at is None else self.book.at(at).doc
        known = model is not None and model in doc.models
        base = doc.models[model] if known and model is not None else doc.default_price
        if model is not None and mig_profile:
            per_instance = doc.mig_profiles.get(model, {}).get(mig_profile)
            if per_instance is not None:
                base = per_instance / mig_fraction(mig_profile, model)
        multiplier = doc.pools.get(pool, 1.0) if pool else 1.0
        return Price(base * multiplier, known)

    def rate(self, node: NodeFacts, *, at: float, mig_profile: str | None = None) -> GpuRate:
        """Every rule but commitments (``pricing_commitments.commitment_hour`` blends those in)."""
        return self.book.rate(node, at=at, mig_profile=mig_profile)


def _load_text(text: str, source: str) -> dict[str, object]:
    try:
        raw = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise PricingError(f"{source}: not valid YAML/JSON: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise PricingError(f"{source}: expected a mapping at the top level")
    return raw


def _fail(item: SourcedDoc | tuple[str, str], field: str, *, msg: str) -> PricingError:
    source, prefix = (item.source, item.prefix) if isinstance(item, SourcedDoc) else item
    path = f"{prefix}.{field}" if prefix and field and not field.startswith("[") else prefix + field
    return PricingError(f"{source}: field {path}: {msg}")


def parse_document(raw: object, source: str, *, prefix: str = "") -> SourcedDoc:
    """Validate one document (a mapping); errors name ``source`` and the field under ``prefix``."""
    if not isinstance(raw, dict):
        raise _fail((source, prefix), "", msg="expected a mapping") if prefix else PricingError(
            f"{source}: expected a mapping at the top level")
    try:
        doc = PricingDoc.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail((source, prefix), field_path(tuple(err["loc"])), msg=err["msg"]) from exc
    item = SourcedDoc(doc, source, prefix)
    problems = rule_violations(doc)
    if problems:
        field, msg = problems[0]
        raise _fail(item, field, msg=msg)
    return item


def _where(item: SourcedDoc) -> str:
    return f"{item.source} {item.prefix}" if item.prefix else item.source


def build_pricing(docs: Sequence[SourcedDoc]) -> Pricing:
    """Check documents against each other (one currency, distinct ``effective_from``) and combine them."""
    first = docs[0]
    if len(docs) > 1:
        seen: dict[float, SourcedDoc] = {}
        for item in docs:
            if item.doc.effective_from is None:
                raise _fail(item, "effective_from", msg="required when several pricing documents are kept")
            if item.doc.currency != first.doc.currency:
                raise _fail(item, "currency",
                            msg=f"{item.doc.currency!r} differs from {first.doc.currency!r} in {_where(first)}")
            when = item.doc.effective_from.timestamp()
            if when in seen:
                raise _fail(item, "effective_from",
                            msg=f"{item.doc.effective_from.isoformat()} is already taken by {_where(seen[when])}")
            seen[when] = item
    return Pricing(PriceBook([PriceList(item.doc) for item in docs]))


def parse_documents(text: str, source: str) -> list[SourcedDoc]:
    """Validate a file's document, or each of its ``versions:``; errors name ``source`` and the field."""
    raw = _load_text(text, source)
    if "versions" not in raw:
        return [parse_document(raw, source)]
    extra = sorted(k for k in raw if k != "versions")
    if extra:
        raise PricingError(f"{source}: field {extra[0]}: not allowed beside versions (put it in each version)")
    versions = raw["versions"]
    if not isinstance(versions, list) or not versions:
        raise PricingError(f"{source}: field versions: expected a non-empty list of pricing documents")
    return [parse_document(v, source, prefix=f"versions[{i}]") for i, v in enumerate(versions)]


def parse_pricing(text: str, source: str) -> Pricing:
    """Parse and validate a pricing file; raises ``PricingError`` naming ``source`` and the field."""
    return build_pricing(parse_documents(text, source))
