"""The published rate card: SKU ids derived from model, MIG profile and pool, and one price id per price point.

The export and ``gpu-cost-exporter pricing --format focus-price-list`` derive ids with the same functions; the
price list prices each SKU from the pricing documents themselves (the list price booking uses: instance type,
model, MIG profile, owned hardware; pools and capacity types discount the effective price only), so comparing a
ledger's booked list prices with it is an independent check of the export's ``SkuPriceId`` and ``ListUnitPrice``.
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

from exporter.aggregator.focus.amounts import price_point
from exporter.aggregator.focus.format import decimal_text, money, utc_text
from exporter.model.pricing.document import Pricing
from exporter.model.pricing.labels import NodeFacts
from exporter.model.pricing.resolve import GpuRate, PriceList

PRICING_UNIT = "GPU-Hours"
SKU_METER = "GPU Hours"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


@lru_cache(maxsize=4096)
def sku_id(model: str, mig_profile: str, *, pool: str) -> str:
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


def sku_price_id(sku: str, currency: str, *, price: Decimal) -> str:
    """A price point's id: the SKU, currency and price, so a repricing gets a new id."""
    return f"{sku}-{currency.lower()}-{decimal_text(price)}"


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


def _rate(prices: PriceList, key: SkuKey, *, node: NodeFacts | None = None) -> GpuRate:
    facts = node or NodeFacts(name="", gpu_model=key.model)
    return prices.rate(NodeFacts(facts.name, key.model or None, facts.instance_type, facts.capacity_type,
                                 key.pool or None), key.mig_profile or None)


def _entry(key: SkuKey, currency: str, *, per_gpu_hour: float, known: bool) -> PriceEntry:
    point = price_point(money(per_gpu_hour))
    sku = sku_id(key.model, key.mig_profile, pool=key.pool)
    return PriceEntry(key, sku, sku_price_id(sku, currency, price=point), currency, point, known)


def price_list(pricing: Pricing, keys: Iterable[SkuKey]) -> list[PriceEntry]:
    """Every SKU in ``keys`` at its list price in each pricing document (one row per distinct price id)."""
    out: dict[str, PriceEntry] = {}
    for key in sorted(set(keys), key=lambda k: (k.model, k.mig_profile, k.pool)):
        for prices in pricing.book.lists:
            rate = _rate(prices, key)
            entry = _entry(key, pricing.currency, per_gpu_hour=rate.list_per_gpu_hour, known=rate.known)
            out.setdefault(entry.sku_price_id, entry)
    return list(out.values())


class PriceMismatch(ValueError):
    """A booked list price that no pricing document publishes; the message names the SKU."""


def _documents_of_hour(pricing: Pricing, hour: int) -> list[PriceList]:
    """The documents in force during ``[hour, hour + 1 h)``: one, or more when one took effect within the hour."""
    later = [p for p in pricing.book.lists if p.effective_from is not None and hour < p.effective_from < hour + 3600]
    return [pricing.book.at(hour), *later]


def published_price(pricing: Pricing, booked: PriceEntry, *, hour: int, node: NodeFacts | None,
                    list_is_effective: bool = False) -> PriceEntry:
    """The price list entry of a booked row: the published one when the booked list price is what the pricing
    documents in force in that hour publish for the SKU on that node, the booked one when the hour mixed two
    documents' prices (booking prices each tick by the document in force). ``list_is_effective``: a ledger from
    before list prices, whose list cost is the effective cost (pool and capacity type multipliers applied).
    Raises ``PriceMismatch`` otherwise."""
    if booked.currency != pricing.currency:
        raise PriceMismatch(f"SKU {booked.sku_id} is booked in {booked.currency}; the pricing file is in "
                            f"{pricing.currency}")
    if booked.category == "Committed":
        return _published_commitment(pricing, booked)
    rates = [_rate(prices, booked.key, node=node) for prices in _documents_of_hour(pricing, hour)]
    entries = [_entry(booked.key, pricing.currency,
                      per_gpu_hour=r.effective_per_gpu_hour if list_is_effective else r.list_per_gpu_hour,
                      known=r.known) for r in rates]
    for entry in entries:
        if entry.unit_price == booked.unit_price:
            return entry
    points = [e.unit_price for e in entries]
    if len(points) > 1 and min(points) <= booked.unit_price <= max(points):
        return booked
    where = f" on node {node.name}" if node is not None and node.name else ""
    raise PriceMismatch(f"SKU {booked.sku_id}{where} is booked at list price {decimal_text(booked.unit_price)} "
                        f"{booked.currency} in the hour {utc_text(hour)}; the pricing file publishes "
                        f"{' or '.join(decimal_text(p) for p in points)}")


def _published_commitment(pricing: Pricing, booked: PriceEntry) -> PriceEntry:
    for entry in commitment_prices(pricing):
        if entry.sku_id == booked.sku_id:
            if entry.unit_price != booked.unit_price:
                raise PriceMismatch(f"SKU {booked.sku_id} is booked at list price "
                                    f"{decimal_text(booked.unit_price)} {booked.currency}; the pricing file "
                                    f"publishes {decimal_text(entry.unit_price)}")
            return entry
    raise PriceMismatch(f"SKU {booked.sku_id}: no commitment of the pricing file has this name")


def booked_price(row: Mapping[str, Any]) -> PriceEntry | None:
    """The price list entry an exported row references (None for a row without a price)."""
    if row.get("SkuPriceId") is None or row.get("ListUnitPrice") is None:
        return None
    key = SkuKey(str(row.get("x_GpuModel") or ""), str(row.get("x_MigProfile") or ""), str(row.get("x_NodePool") or ""))
    return PriceEntry(key, str(row["SkuId"]), str(row["SkuPriceId"]), str(row["BillingCurrency"]),
                      Decimal(row["ListUnitPrice"]), listed=True,
                      # the SKU's kind: a commitment's (its unused part) or a GPU's, whatever a row's pricing
                      category="Committed" if row.get("CommitmentDiscountStatus") == "Unused" else "Standard")


def commitment_prices(pricing: Pricing) -> list[PriceEntry]:
    """Each commitment of the pricing file as the SKU its unused part is exported under: list price 0 (no
    GPU-hour is had for unused committed time at any price; the commitment's rate is the contracted price)."""
    zero = price_point(Decimal(0))
    out: dict[str, PriceEntry] = {}
    for c in (c for prices in pricing.book.lists for c in prices.doc.commitments):
        sku = commitment_sku_id(c.name)
        out.setdefault(sku, PriceEntry(SkuKey(c.model, "", ""), sku, sku_price_id(sku, pricing.currency, price=zero),
                                       pricing.currency, zero, listed=True, category="Committed"))
    return sorted(out.values(), key=lambda e: e.sku_id)


def file_keys(pricing: Pricing) -> list[SkuKey]:
    """SKUs the pricing documents name by themselves: each model (listed or owned), its MIG profiles, each
    without and with each pool."""
    keys: set[SkuKey] = set()
    for doc in (prices.doc for prices in pricing.book.lists):
        pools = ["", *doc.pools]
        for model in set(doc.models) | set(doc.mig_profiles) | {o.model for o in doc.on_prem}:
            for profile in ["", *doc.mig_profiles.get(model, {})]:
                keys |= {SkuKey(model, profile, pool) for pool in pools}
    return sorted(keys, key=lambda k: (k.model, k.mig_profile, k.pool))


PRICE_LIST_COLUMNS = ("SkuId", "SkuPriceId", "SkuMeter", "PricingUnit", "PricingCategory", "ListUnitPrice",
                      "BillingCurrency", "x_GpuModel", "x_MigProfile", "x_NodePool", "x_ListedModel")


def render_price_list(entries: Iterable[PriceEntry]) -> str:
    """The price list CSV (one row per price point), as ``price-list`` prints it."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(PRICE_LIST_COLUMNS)
    for e in entries:
        writer.writerow([e.sku_id, e.sku_price_id, SKU_METER, PRICING_UNIT, e.category, decimal_text(e.unit_price),
                         e.currency, e.key.model, e.key.mig_profile or None, e.key.pool or None,
                         "true" if e.listed else "false"])
    return buf.getvalue()
