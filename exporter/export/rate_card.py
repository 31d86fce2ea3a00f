"""The published rate card: SKU ids derived from model, MIG profile and pool, and one price id per price point.

The export and ``gpu-cost-exporter pricing --format focus-price-list`` derive ids with the same functions, so
every ``SkuPriceId`` a FOCUS row cites is a row of the price list produced from the pricing file that priced it.
A price point is part of its id: a repriced SKU gets a new ``SkuPriceId`` (FOCUS: one price per id, stable).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from exporter.export.focus_format import decimal_text, money
from exporter.model.pricing import Pricing

PRICE_QUANTUM = Decimal("1e-12")  # far below any price; far above the float noise of cost / GPU-hours
PRICING_UNIT = "GPU-Hours"
SKU_METER = "GPU Hours"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


@lru_cache(maxsize=4096)
def sku_id(model: str, mig_profile: str, pool: str) -> str:
    """``gpu-<model>[-mig-<profile>][-pool-<pool>]``: the same inputs always give the same id."""
    parts = ["gpu", _slug(model) or "unknown"]
    if mig_profile:
        parts += ["mig", _slug(mig_profile)]
    if pool:
        parts += ["pool", _slug(pool)]
    return "-".join(parts)


def commitment_sku_id(name: str) -> str:
    """``gpu-commitment-<name>``: the SKU of a commitment's committed GPU-hours."""
    return f"gpu-commitment-{_slug(name) or 'unnamed'}"


def price_point(per_gpu_hour: Decimal) -> Decimal:
    """A unit price rounded to the rate card's quantum, so the ledger and the pricing file agree on it."""
    return per_gpu_hour.quantize(PRICE_QUANTUM)


def sku_price_id(sku: str, currency: str, price: Decimal) -> str:
    return f"{sku}-{currency.lower()}-{decimal_text(price)}"


def unit_price(cost: Decimal, gpu_hours: Decimal) -> Decimal | None:
    """The price a ledger row was booked at (cost / GPU-hours); None when it booked no time."""
    if gpu_hours <= 0:
        return None
    return price_point(cost / gpu_hours)


@dataclass(frozen=True, slots=True)
class SkuKey:
    """What a SKU is derived from."""

    model: str
    mig_profile: str
    pool: str


@dataclass(frozen=True, slots=True)
class PriceEntry:
    """One row of the published price list."""

    key: SkuKey
    sku_id: str
    sku_price_id: str
    currency: str
    unit_price: Decimal
    listed: bool
    category: str = "Standard"  # FOCUS PricingCategory: "Committed" for a commitment's GPU-hours


def price_list(pricing: Pricing, keys: Iterable[SkuKey]) -> list[PriceEntry]:
    """Price every SKU in ``keys`` with the pricing file's own lookup (the one booking uses)."""
    out: list[PriceEntry] = []
    for key in sorted(set(keys), key=lambda k: (k.model, k.mig_profile, k.pool)):
        price = pricing.price(key.model, key.mig_profile or None, key.pool or None)
        point = price_point(money(price.per_gpu_hour))
        sku = sku_id(key.model, key.mig_profile, key.pool)
        out.append(PriceEntry(key, sku, sku_price_id(sku, pricing.currency, point), pricing.currency, point,
                              price.known))
    return out


def booked_price(row: Mapping[str, Any]) -> PriceEntry | None:
    """The price list entry an exported row references (None for a row without a price)."""
    if row.get("SkuPriceId") is None or row.get("ListUnitPrice") is None:
        return None
    key = SkuKey(str(row.get("x_GpuModel") or ""), str(row.get("x_MigProfile") or ""), str(row.get("x_NodePool") or ""))
    return PriceEntry(key, str(row["SkuId"]), str(row["SkuPriceId"]), str(row["BillingCurrency"]),
                      Decimal(row["ListUnitPrice"]), listed=True,
                      category=str(row.get("PricingCategory") or "Standard"))


def commitment_prices(pricing: Pricing) -> list[PriceEntry]:
    """Each commitment of the pricing file as the SKU its unused part is exported under: list price 0 (no
    GPU-hour is had for unused committed time at any price; the commitment's rate is the contracted price)."""
    zero = price_point(Decimal(0))
    out: dict[str, PriceEntry] = {}
    for c in pricing.doc.commitments:
        sku = commitment_sku_id(c.name)
        out.setdefault(sku, PriceEntry(SkuKey(c.model, "", ""), sku, sku_price_id(sku, pricing.currency, zero),
                                       pricing.currency, zero, listed=True, category="Committed"))
    return sorted(out.values(), key=lambda e: e.sku_id)


def file_keys(pricing: Pricing) -> list[SkuKey]:
    """SKUs the pricing file names by itself: each model, its MIG profiles, each without and with each pool."""
    doc = pricing.doc
    pools = ["", *doc.pools]
    keys: list[SkuKey] = []
    for model in sorted(set(doc.models) | set(doc.mig_profiles)):
        for profile in ["", *doc.mig_profiles.get(model, {})]:
            keys += [SkuKey(model, profile, pool) for pool in pools]
    return keys


PRICE_LIST_COLUMNS = ("SkuId", "SkuPriceId", "SkuMeter", "PricingUnit", "PricingCategory", "ListUnitPrice",
                      "BillingCurrency", "x_GpuModel", "x_MigProfile", "x_NodePool", "x_ListedModel")


def render_price_list(entries: Iterable[PriceEntry]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(PRICE_LIST_COLUMNS)
    for e in entries:
        writer.writerow([e.sku_id, e.sku_price_id, SKU_METER, PRICING_UNIT, e.category, decimal_text(e.unit_price),
                         e.currency, e.key.model, e.key.mig_profile or None, e.key.pool or None,
                         "true" if e.listed else "false"])
    return buf.getvalue()
