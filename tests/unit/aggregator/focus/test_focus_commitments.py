"""A commitment larger than the fleet: its unused part is a FOCUS row of its own (CommitmentDiscountStatus
Unused), so the export adds up to the invoice and to ``report``.

Arithmetic (PRICING.md rule 4): commitment h100-1yr, N = 16 H100 at 2.10/h; the fleet has n = 8 (gpu-node-07),
so c = min(16, 8) / 8 = 1 and every GPU costs 2.10. Pod: 2 GPU-h x 2.10 = 4.20 (list 2 x 4.00 = 8.00), idle
0.8 GPU-h x 2.10 = 1.68. Unallocated: 6 GPU-h x 2.10 = 12.60 (list 24.00). Unused: (16 - 8) x 1 h = 8 GPU-h
= 28800 s x 2.10 = 16.80, list 0. Total 4.20 + 12.60 + 16.80 = 33.60 = 16 x 2.10, the invoice line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.aggregator.focus.focus_helpers import (
    CapacityRow,
    UnusedRow,
    UsageRow,
    assert_focus13_rules,
    assert_formats,
    assert_reconciles,
    dec,
    read_csv,
    report_total,
    write_ledger,
)
from tests.unit.aggregator.focus.test_focus_golden import HOUR, export_rows, run_cli

PRICING = """currency: USD
default_price: 1.0
models: {"NVIDIA H100 80GB HBM3": 4.0}
commitments:
  - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 16, hourly: 2.10,
     start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"}
"""


@pytest.fixture
def committed_ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer-7f9c",
                                 allocated_s=7200.0, used_s=4320.0, idle_s=2880.0, cost=4.2, idle_cost=1.68,
                                 list_cost=8.0)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=21600.0, cost=12.6, list_cost=24.0)],
                 unused=[UnusedRow(hour=HOUR, commitment="h100-1yr", seconds=28800.0, cost=16.8)])
    return path


def test_unused_commitment_is_a_usage_row_with_status_unused(committed_ledger: Path, tmp_path: Path) -> None:
    rows = export_rows(committed_ledger, tmp_path)
    assert [r["x_CapacityState"] for r in rows] == ["Allocated", "Unallocated", "UnusedCommitment"]
    pod, free, unused = rows
    # the node's charge: 4.20 + 12.60 = 16.80, split 0.25 / 0.75 of its effective cost
    assert (pod["EffectiveCost"], pod["ListCost"], pod["ContractedUnitPrice"], pod["ListUnitPrice"]) == (
        "4.2", "8.0", "2.1", "4.0")
    assert pod["x_IdleCost"] == "1.68"  # 0.8 GPU-h x 2.10
    assert (free["EffectiveCost"], free["ListCost"]) == ("12.6", "24.0")
    assert pod["AllocatedMethodDetails"].startswith('{"Elements":[{"AllocatedRatio":0.25,')
    assert free["AllocatedMethodDetails"].startswith('{"Elements":[{"AllocatedRatio":0.75,')
    # the unused part: 8 GPU-h x 2.10 = 16.80, list 0
    assert unused["CommitmentDiscountStatus"] == "Unused" and unused["ChargeCategory"] == "Usage"
    assert unused["CommitmentDiscountId"] == "gpu-cost-exporter://prod-eu1/commitments/h100-1yr"
    assert unused["CommitmentDiscountName"] == "h100-1yr"
    assert unused["CommitmentDiscountType"] == "GPU Commitment" and unused["CommitmentDiscountCategory"] == "Usage"
    assert unused["CommitmentDiscountQuantity"] == unused["PricingQuantity"] == "8.0"
    assert unused["CommitmentDiscountUnit"] == unused["PricingUnit"] == "GPU-Hours"
    assert unused["ConsumedQuantity"] == unused["ConsumedUnit"] == ""  # nothing was consumed
    assert unused["EffectiveCost"] == unused["BilledCost"] == unused["ContractedCost"] == "16.8"
    assert (unused["ContractedUnitPrice"], unused["ListUnitPrice"], unused["ListCost"]) == ("2.1", "0.0", "0.0")
    assert unused["SkuId"] == "gpu-commitment-h100-1yr"
    assert unused["SkuPriceId"] == "gpu-commitment-h100-1yr-usd-0.0" and unused["PricingCategory"] == "Committed"
    assert unused["AllocatedResourceId"] == unused["AllocatedMethodId"] == unused["ResourceId"] == ""
    assert unused["x_UnusedCommitmentGpuSeconds"] == "28800.0" and unused["x_GpuModel"] == "NVIDIA H100 80GB HBM3"
    assert unused["ChargePeriodStart"] == "2026-11-03T14:00:00Z"
    # node rows do not claim a commitment: the ledger keeps the blended rate, not which GPU it covered
    assert pod["CommitmentDiscountId"] == pod["CommitmentDiscountStatus"] == free["CommitmentDiscountStatus"] == ""
    assert_formats(rows)
    assert_focus13_rules(rows)


def test_export_adds_up_to_the_report_incl_the_unused_commitment(committed_ledger: Path, tmp_path: Path) -> None:
    rows = export_rows(committed_ledger, tmp_path)
    total = sum((dec(r["EffectiveCost"]) for r in rows), dec("0.0"))
    assert total == dec("33.6")  # 4.20 + 12.60 + 16.80 = 16 x 2.10
    assert report_total(committed_ledger) == dec("33.6")
    assert_reconciles(rows, committed_ledger)


def test_the_price_list_has_the_commitments_sku(committed_ledger: Path, tmp_path: Path) -> None:
    (tmp_path / "pricing.yaml").write_text(PRICING)
    for extra in ([], ["--ledger", str(committed_ledger)]):
        done = run_cli("pricing", "--pricing-file", str(tmp_path / "pricing.yaml"), "--format", "focus-price-list",
                       *extra)
        assert done.returncode == 0, done.stderr
        listed = {r["SkuPriceId"]: r for r in read_csv(done.stdout)}
        entry = listed["gpu-commitment-h100-1yr-usd-0.0"]
        assert (entry["ListUnitPrice"], entry["PricingCategory"], entry["SkuId"]) == (
            "0.0", "Committed", "gpu-commitment-h100-1yr")
