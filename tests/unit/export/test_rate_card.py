"""The published rate card: SKU ids from model, MIG profile and pool; prices from the pricing file's own lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from exporter.export.rate_card import SkuKey, price_list, sku_id, sku_price_id
from exporter.model.pricing import parse_pricing
from tests.unit.export.focus_helpers import read_csv

REPO = Path(__file__).resolve().parents[3]
PRICING = """
currency: USD
default_price: 1.00
models: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA A100-SXM4-80GB": 2.50, "NVIDIA L4": 0.80}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.45}}
pools: {dev: 0.5}
"""


def test_sku_ids_are_derived_deterministically() -> None:
    assert sku_id("NVIDIA A100-SXM4-80GB", "1g.10gb", "inference") == (
        "gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb-pool-inference")
    assert sku_id("NVIDIA L4", "", "") == "gpu-nvidia-l4"
    assert sku_price_id("gpu-nvidia-l4", "EUR", __import__("decimal").Decimal("0.400")) == "gpu-nvidia-l4-eur-0.4"


def test_prices_come_from_the_pricing_lookup() -> None:
    """H100 4.00; L4 in the dev pool 0.80 x 0.5 = 0.40; A100 1g.10gb 0.45 per instance-hour over 1/7 of a
    GPU = 3.15 per GPU-hour; an unlisted model the default 1.00 (and flagged as not listed)."""
    entries = price_list(parse_pricing(PRICING, "p.yaml"), [
        SkuKey("NVIDIA H100 80GB HBM3", "", "training"), SkuKey("NVIDIA L4", "", "dev"),
        SkuKey("NVIDIA A100-SXM4-80GB", "1g.10gb", ""), SkuKey("NVIDIA T4", "", "")])
    got = {e.sku_id: (str(e.unit_price.normalize()), e.listed) for e in entries}
    assert got == {"gpu-nvidia-h100-80gb-hbm3-pool-training": ("4", True), "gpu-nvidia-l4-pool-dev": ("0.4", True),
                   "gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb": ("3.15", True), "gpu-nvidia-t4": ("1", False)}


def test_pricing_command_lists_the_files_skus(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRICING)
    done = subprocess.run([sys.executable, "-m", "exporter", "pricing", "--pricing-file", str(tmp_path / "p.yaml"),
                           "--format", "focus-price-list"], cwd=REPO, capture_output=True, text=True, check=True)
    rows = {r["SkuPriceId"]: r for r in read_csv(done.stdout)}
    assert rows["gpu-nvidia-l4-pool-dev-usd-0.4"]["ListUnitPrice"] == "0.4"
    assert rows["gpu-nvidia-a100-sxm4-80gb-mig-1g.10gb-usd-3.15"]["PricingUnit"] == "GPU-Hours"
    assert len(rows) == 3 * 2 + 2  # 3 models x (no pool, dev) + the A100's MIG profile x (no pool, dev)


def test_pricing_command_bad_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("default_price: -1\n")
    done = subprocess.run([sys.executable, "-m", "exporter", "pricing", "--pricing-file", str(tmp_path / "p.yaml"),
                           "--format", "focus-price-list"], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "default_price" in done.stderr and done.stdout == ""
