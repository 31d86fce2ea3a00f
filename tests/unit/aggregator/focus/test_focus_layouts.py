"""Ledgers as they grow: the ``unobserved`` capacity table and the ``list_cost`` column are exported as soon as
they exist; and the Parquet writer keeps the exact decimals and UTC times of the CSV."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa  # in the dev extra: the Parquet path is tested, never skipped
import pyarrow.parquet as pq

from tests.unit.aggregator.focus.focus_helpers import (
    CapacityRow,
    UsageRow,
    add_unobserved,
    assert_focus13_rules,
    assert_reconciles,
    read_csv,
    write_ledger,
)
from tests.unit.aggregator.focus.test_focus_golden import HOUR, export_rows, run_cli


def _ledger(tmp_path: Path, unallocated_s: float, unallocated_cost: float) -> Path:
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer-7f9c",
                                 allocated_s=7200.0, used_s=4320.0, idle_s=2880.0, cost=8.0, idle_cost=3.2)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=unallocated_s, cost=unallocated_cost)])
    return path


def test_unobserved_capacity_is_a_charge_with_no_allocated_resource(tmp_path: Path) -> None:
    """8 H100 at 4.00 = 32.00: pod 2 GPU-h = 8.00 (0.25), unallocated 5 GPU-h = 20.00 (0.625), unobserved
    1 GPU-h = 4.00 (0.125). 8 + 20 + 4 = 32; 0.25 + 0.625 + 0.125 = 1."""
    ledger = _ledger(tmp_path, 18000.0, 20.0)
    add_unobserved(ledger, [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=3600.0, cost=4.0)])
    rows = export_rows(ledger, tmp_path)
    assert [r["x_CapacityState"] for r in rows] == ["Allocated", "Unallocated", "Unobserved"]
    assert [r["EffectiveCost"] for r in rows] == ["8.0", "20.0", "4.0"]
    assert [r["AllocatedMethodDetails"].split(",")[0] for r in rows] == [
        '{"Elements":[{"AllocatedRatio":0.25', '{"Elements":[{"AllocatedRatio":0.625',
        '{"Elements":[{"AllocatedRatio":0.125']
    unobserved = rows[2]
    assert unobserved["AllocatedResourceId"] == "" and unobserved["x_UnobservedGpuSeconds"] == "3600.0"
    assert unobserved["x_UnallocatedGpuSeconds"] == "0.0" and unobserved["PricingQuantity"] == "1.0"
    assert unobserved["ChargeDescription"].startswith("Unobserved GPU capacity on node gpu-node-07")
    assert_focus13_rules(rows)
    assert_reconciles(rows, ledger)


def test_list_cost_column_is_used_once_it_exists(tmp_path: Path) -> None:
    """Version-2 pricing writes list_cost: the pod's list price 5.00 x 2 GPU-h = 10.00 with an effective 8.00
    (4.00 x 2). ListCost/ListUnitPrice 10.00/5.00, ContractedCost/ContractedUnitPrice and EffectiveCost
    8.00/4.00, the price id at the list price. The undiscounted capacity row keeps ListCost = cost (24.00)."""
    ledger = _ledger(tmp_path, 21600.0, 24.0)
    conn = sqlite3.connect(ledger)
    conn.execute("UPDATE usage SET list_cost = 10000000000")  # 10.00 in the ledger's nano-units
    conn.commit()
    conn.close()
    pod, free = export_rows(ledger, tmp_path)
    assert (pod["ListCost"], pod["ListUnitPrice"]) == ("10.0", "5.0")
    assert (pod["ContractedCost"], pod["ContractedUnitPrice"], pod["EffectiveCost"]) == ("8.0", "4.0", "8.0")
    assert pod["SkuPriceId"].endswith("-usd-5.0")
    assert (free["ListCost"], free["ListUnitPrice"], free["EffectiveCost"]) == ("24.0", "4.0", "24.0")
    assert_focus13_rules([pod, free])


def test_parquet_has_decimal_and_utc_types_and_the_csv_values(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, 21600.0, 24.0)
    csv_rows = export_rows(ledger, tmp_path)
    out = tmp_path / "focus.parquet"
    done = run_cli("export", "--ledger", str(ledger), "--format", "focus-parquet", "--since", "2026-11-03T00:00:00Z",
                   "--until", "2026-11-04T00:00:00Z", "--cluster", "prod-eu1", "--output", str(out))
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.schema.field("EffectiveCost").type == pa.decimal128(38, 18)
    assert table.schema.field("ChargePeriodStart").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("AllocatedMethodDetails").type == pa.string()
    assert table.column_names == list(csv_rows[0])
    got = table.to_pylist()
    assert [r["EffectiveCost"] for r in got] == [Decimal("8"), Decimal("24")]
    assert got[0]["ChargePeriodStart"] == datetime(2026, 11, 3, 14, tzinfo=UTC)
    assert got[1]["AllocatedResourceId"] is None and got[0]["AllocatedTags"] == csv_rows[0]["AllocatedTags"]
    for parquet_row, csv_row in zip(got, csv_rows, strict=True):
        for name, value in parquet_row.items():
            if isinstance(value, Decimal):
                assert value == Decimal(csv_row[name]), name
    assert (tmp_path / "focus.parquet.metadata.json").exists()


def test_export_of_an_empty_window_is_the_header_only(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, 21600.0, 24.0)
    done = run_cli("export", "--ledger", str(ledger), "--format", "focus-csv", "--since", "2026-10-01T00:00:00Z",
                   "--until", "2026-10-02T00:00:00Z")
    assert done.returncode == 0 and read_csv(done.stdout) == [] and done.stdout.startswith("AllocatedMethodDetails,")


def test_a_row_with_no_gpu_time_keeps_the_nodes_price(tmp_path: Path) -> None:
    """A holder booked 0 s (and so 0.00): its unit price is the origin's 4.00 (24.00 / 6 GPU-h), quantity 0.0,
    cost 0.0 = 4.00 x 0.0, ratio 0; the other rows keep 8 / 32 and 24 / 32."""
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer-7f9c",
                                 allocated_s=7200.0, used_s=4320.0, idle_s=2880.0, cost=8.0, idle_cost=3.2),
                        UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="zz-empty",
                                 allocated_s=0.0, used_s=0.0, idle_s=0.0, cost=0.0, idle_cost=0.0)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=21600.0, cost=24.0)])
    rows = export_rows(path, tmp_path)
    empty = next(r for r in rows if r["x_PodName"] == "zz-empty")
    assert (empty["ListUnitPrice"], empty["PricingQuantity"], empty["EffectiveCost"]) == ("4.0", "0.0", "0.0")
    assert empty["AllocatedMethodDetails"].startswith('{"Elements":[{"AllocatedRatio":0.0,')
    assert_focus13_rules(rows)
    assert_reconciles(rows, path)
