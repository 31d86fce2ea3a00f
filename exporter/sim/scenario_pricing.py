"""A scenario's ``pricing:`` block: a whole pricing document (or ``versions:``), validated as the
aggregator would validate the file it becomes, so a bad block is refused before anything runs."""

from __future__ import annotations

from typing import Any

from exporter.model.pricing.document import Pricing, PricingError, build_pricing, parse_document

#: Version-1 scenario keys that a ``pricing:`` block replaces (SCENARIO.md: they must be absent then).
REPLACED_KEYS = ("prices", "default_price", "pools")


def pricing_block(raw: object, source: str) -> tuple[dict[str, Any], Pricing]:
    """The block as written (what the simulator writes to the aggregator's pricing file) and what it
    means; raises ``PricingError`` naming ``source`` and the field under ``pricing``."""
    if not isinstance(raw, dict):
        raise PricingError(f"{source}: field pricing: expected a mapping (a pricing document)")
    if "versions" in raw:
        extra = sorted(k for k in raw if k != "versions")
        versions = raw["versions"]
        if extra:
            raise PricingError(f"{source}: field pricing.{extra[0]}: not allowed beside versions")
        if not isinstance(versions, list) or not versions:
            raise PricingError(f"{source}: field pricing.versions: expected a non-empty list of pricing documents")
        docs = [parse_document(v, source, prefix=f"pricing.versions[{i}]") for i, v in enumerate(versions)]
    else:
        docs = [parse_document(raw, source, prefix="pricing")]
    return dict(raw), build_pricing(docs)
