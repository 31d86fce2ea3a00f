"""The published rate card: SKU ids from model, MIG profile and pool; list prices from the pricing documents (the
ones booking uses), and the check of a booked list price against them."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from exporter.aggregator.focus.rate_card import (
    PriceEntry,
    PriceMismatch,
    SkuKey,
    commitment_prices,
    file_keys,
    price_list,
    published_price,
    sku_id,
    sku_price_id,
)
from exporter.model.pricing.document import parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts
from tests.unit.aggregator.focus.focus_helpers import read_csv

REPO = Path(__file__).resolve().parents[4]
PRICING = """
currency: USD
default_price: 1.00
models: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA A100-SXM4-80GB": 2.50, "NVIDIA L4": 0.80}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.45}}
pools: {dev: 0.5}
"""


def test_sku_ids_are_derived_deterministically() -> None:
    assert sku_id("NVIDIA A100-SXM4-80GB", "1g.10gb", pool="inference") == (
        "gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb-pool-inference")
    assert sku_id("NVIDIA L4", "", pool="") == "gpu-nvidia-l4"
    assert sku_price_id("gpu-nvidia-l4", "EUR", price=__import__("decimal").Decimal("0.400")) == "gpu-nvidia-l4-eur-0.4"


def test_prices_come_from_the_pricing_lookup() -> None:
    """List prices: H100 4.00; L4 in the dev pool 0.80 (the pool's 0.5 discounts the effective price only, as
    booking does); A100 1g.10gb 0.45 per instance-hour over 1/7 of a GPU = 3.15 per GPU-hour; an unlisted model
    the default 1.00 (and flagged as not listed)."""
    entries = price_list(parse_pricing(PRICING, "p.yaml"), [
        SkuKey("NVIDIA H100 80GB HBM3", "", "training"), SkuKey("NVIDIA L4", "", "dev"),
        SkuKey("NVIDIA A100-SXM4-80GB", "1g.10gb", ""), SkuKey("NVIDIA T4", "", "")])
    got = {e.sku_id: (str(e.unit_price.normalize()), e.listed) for e in entries}
    assert got == {"gpu-nvidia-h100-80gb-hbm3-pool-training": ("4", True), "gpu-nvidia-l4-pool-dev": ("0.8", True),
                   "gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb": ("3.15", True), "gpu-nvidia-t4": ("1", False)}


def test_pricing_command_lists_the_files_skus(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRICING)
    done = subprocess.run([sys.executable, "-m", "exporter", "pricing", "--pricing-file", str(tmp_path / "p.yaml"),
                           "--format", "focus-price-list"], cwd=REPO, capture_output=True, text=True, check=True)
    rows = {r["SkuPriceId"]: r for r in read_csv(done.stdout)}
    assert rows["gpu-nvidia-l4-pool-dev-usd-0.8"]["ListUnitPrice"] == "0.8"
    assert rows["gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb-usd-3.15"]["PricingUnit"] == "GPU-Hours"
    assert len(rows) == 3 * 2 + 2  # 3 models x (no pool, dev) + the A100's MIG profile x (no pool, dev)


def test_pricing_command_bad_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("default_price: -1\n")
    done = subprocess.run([sys.executable, "-m", "exporter", "pricing", "--pricing-file", str(tmp_path / "p.yaml"),
                           "--format", "focus-price-list"], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "default_price" in done.stderr and done.stdout == ""


# Two dated documents: the H100 goes from 4.00 to 3.00 at 2026-11-03T14:30:00Z, within the hour HOUR; the spot p5
# instance lists 55.04 / 8 = 6.88 per GPU-hour in both (spot's 0.35 discounts the effective price only).
DATED = """
versions:
  - currency: USD
    default_price: 1.0
    effective_from: "2026-01-01T00:00:00Z"
    models: {"NVIDIA H100 80GB HBM3": 4.00}
    pools: {dev: 0.5}
    instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
    capacity_types: {spot: 0.35}
    commitments:
      - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 4, hourly: 2.10,
         start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"}
  - currency: USD
    default_price: 1.0
    effective_from: "2026-11-03T14:30:00Z"
    models: {"NVIDIA H100 80GB HBM3": 3.00}
    instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
"""
HOUR = 1793714400  # 2026-11-03T14:00:00Z
H100 = "NVIDIA H100 80GB HBM3"


def _booked(price: str, *, pool: str = "train", currency: str = "USD") -> PriceEntry:
    key = SkuKey(H100, "", pool)
    sku = sku_id(H100, "", pool=pool)
    return PriceEntry(key, sku, sku_price_id(sku, currency, price=Decimal(price)), currency, Decimal(price),
                      listed=True)


def test_a_booked_price_is_checked_against_the_document_in_force_that_hour() -> None:
    pricing = parse_pricing(DATED, "p.yaml")
    node = NodeFacts("n1", None)
    before = published_price(pricing, _booked("4.0"), hour=HOUR - 3600, node=node)
    after = published_price(pricing, _booked("3.0"), hour=HOUR + 3600, node=node)
    assert (before.sku_price_id, after.sku_price_id) == ("gpu-nvidia-h100-80gb-hbm3-pool-train-usd-4.0",
                                                         "gpu-nvidia-h100-80gb-hbm3-pool-train-usd-3.0")
    with pytest.raises(PriceMismatch, match=r"SKU gpu-nvidia-h100-80gb-hbm3-pool-train on node n1 .* 4\.0 USD "
                                            r"in the hour 2026-11-03T15:00:00Z; the pricing file publishes 3\.0$"):
        published_price(pricing, _booked("4.0"), hour=HOUR + 3600, node=node)
    with pytest.raises(PriceMismatch, match=r"publishes 4\.0$"):  # twice the list price
        published_price(pricing, _booked("8.0"), hour=HOUR - 3600, node=node)


def test_an_hour_in_which_a_document_took_effect_may_mix_both_prices() -> None:
    """The hour from 14:00 holds 30 min at 4.00 and 30 min at 3.00 (the change is at 14:30): booked at
    (0.5 x 4.00 + 0.5 x 3.00) = 3.50, between the two published prices; 4.50 is outside them."""
    pricing = parse_pricing(DATED, "p.yaml")
    node = NodeFacts("n1", None)
    mixed = published_price(pricing, _booked("3.5"), hour=HOUR, node=node)
    assert (mixed.unit_price, mixed.sku_price_id) == (Decimal("3.5"), "gpu-nvidia-h100-80gb-hbm3-pool-train-usd-3.5")
    with pytest.raises(PriceMismatch, match=r"publishes 4\.0 or 3\.0$"):
        published_price(pricing, _booked("4.5"), hour=HOUR, node=node)


def test_the_nodes_instance_type_sets_its_list_price_and_pool_and_spot_do_not() -> None:
    """A spot p5.48xlarge lists 55.04 / 8 = 6.88 per GPU-hour (spot x 0.35 = 2.408 is its effective price); a
    dev-pool H100 without an instance type lists 4.00 (0.5 x 4.00 = 2.00 effective). A ledger from before
    list prices booked the effective price as list price: 2.408 and 2.00 then."""
    pricing = parse_pricing(DATED, "p.yaml")
    spot = NodeFacts("spot-0", None, "p5.48xlarge", CapacityType.SPOT)
    assert published_price(pricing, _booked("6.88"), hour=HOUR - 3600, node=spot).unit_price == Decimal("6.88")
    with pytest.raises(PriceMismatch, match=r"on node spot-0 .* publishes 6\.88$"):
        published_price(pricing, _booked("4.0"), hour=HOUR - 3600, node=spot)
    assert published_price(pricing, _booked("4.0", pool="dev"), hour=HOUR - 3600,
                           node=NodeFacts("dev-0", None)).unit_price == Decimal("4.0")
    assert published_price(pricing, _booked("2.408"), hour=HOUR - 3600, node=spot,
                           list_is_effective=True).unit_price == Decimal("2.408")
    assert published_price(pricing, _booked("2.0", pool="dev"), hour=HOUR - 3600, node=NodeFacts("dev-0", None),
                           list_is_effective=True).unit_price == Decimal("2.0")


def test_commitments_and_currencies_are_checked() -> None:
    pricing = parse_pricing(DATED, "p.yaml")
    listed = commitment_prices(pricing)
    assert [(e.sku_id, e.unit_price, e.category) for e in listed] == [("gpu-commitment-h100-1yr", Decimal(0),
                                                                       "Committed")]
    assert published_price(pricing, listed[0], hour=HOUR + 3600, node=None) == listed[0]
    unknown = PriceEntry(SkuKey(H100, "", ""), "gpu-commitment-other", "gpu-commitment-other-usd-0.0", "USD",
                         Decimal(0), listed=True, category="Committed")
    with pytest.raises(PriceMismatch, match=r"^SKU gpu-commitment-other: no commitment"):
        published_price(pricing, unknown, hour=HOUR + 3600, node=None)
    with pytest.raises(PriceMismatch, match="is booked in EUR; the pricing file is in USD"):
        published_price(pricing, _booked("4.0", currency="EUR"), hour=HOUR - 3600, node=NodeFacts("n1", None))


def test_the_file_list_has_every_documents_prices_and_each_pool_it_names() -> None:
    """H100 at 4.00 (first document) and 3.00 (second), without a pool and in the dev pool the first names."""
    entries = price_list(parse_pricing(DATED, "p.yaml"), file_keys(parse_pricing(DATED, "p.yaml")))
    assert sorted(e.sku_price_id for e in entries) == [
        "gpu-nvidia-h100-80gb-hbm3-pool-dev-usd-3.0", "gpu-nvidia-h100-80gb-hbm3-pool-dev-usd-4.0",
        "gpu-nvidia-h100-80gb-hbm3-usd-3.0", "gpu-nvidia-h100-80gb-hbm3-usd-4.0"]
