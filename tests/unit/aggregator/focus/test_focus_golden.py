"""The worked example of the FOCUS reference, one hour, end to end through the CLI on a ledger written by
the real ``Ledger``: node gpu-node-07, 8 H100 at 4.00 USD per GPU-hour, pod ml-team/trainer-7f9c holding 2.

Arithmetic: origin = 8 GPU x 1 h x 4.00 = 32.00. Pod: 2 GPU-h x 4.00 = 8.00, ratio 8 / 32 = 0.25; used
1.2 GPU-h = 4320 s, idle 0.8 GPU-h = 2880 s, idle cost 0.8 x 4.00 = 3.20. Unallocated: 6 GPU-h = 21600 s
x 4.00 = 24.00, ratio 24 / 32 = 0.75. 8 + 24 = 32; 0.25 + 0.75 = 1.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.unit.aggregator.focus.focus_helpers import (
    CapacityRow,
    UsageRow,
    assert_focus13_rules,
    assert_formats,
    assert_reconciles,
    read_csv,
    write_ledger,
)

REPO = Path(__file__).resolve().parents[4]
HOUR = int(datetime(2026, 11, 3, 14, tzinfo=UTC).timestamp())


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter", *args], cwd=REPO, capture_output=True, text=True,
                          check=False)


@pytest.fixture
def example_ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer-7f9c",
                                 allocated_s=7200.0, used_s=4320.0, idle_s=2880.0, cost=8.0, idle_cost=3.2)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=21600.0, cost=24.0)])
    return path


def export_rows(ledger: Path, tmp_path: Path, *extra: str) -> list[dict[str, str]]:
    out = tmp_path / "focus.csv"
    done = run_cli("export", "--ledger", str(ledger), "--format", "focus-csv", "--since", "2026-11-03T00:00:00Z",
                   "--until", "2026-11-04T00:00:00Z", "--cluster", "prod-eu1", "--output", str(out), *extra)
    assert done.returncode == 0, done.stderr
    return read_csv(out.read_text())


def test_worked_example_golden_rows(example_ledger: Path, tmp_path: Path) -> None:
    rows = export_rows(example_ledger, tmp_path)
    assert [r["x_CapacityState"] for r in rows] == ["Allocated", "Unallocated"]
    pod, free = rows
    for r in rows:  # the origin's dimensions, on both rows
        assert r["ChargePeriodStart"] == "2026-11-03T14:00:00Z" and r["ChargePeriodEnd"] == "2026-11-03T15:00:00Z"
        assert r["BillingPeriodStart"] == "2026-11-01T00:00:00Z" and r["BillingPeriodEnd"] == "2026-12-01T00:00:00Z"
        assert r["ChargeCategory"] == "Usage" and r["ChargeFrequency"] == "Usage-Based" and r["ChargeClass"] == ""
        assert r["PricingCategory"] == "Standard" and r["BillingCurrency"] == "USD"
        assert r["SubAccountId"] == "prod-eu1"
        assert r["ResourceId"] == "k8s://prod-eu1/nodes/gpu-node-07" and r["ResourceName"] == "gpu-node-07"
        assert r["ResourceType"] == "Kubernetes Node"
        assert r["ServiceCategory"] == "Compute" and r["ServiceSubcategory"] == "Containers"
        assert r["SkuId"] == "gpu-nvidia-h100-80gb-hbm3-pool-h100-pool"
        assert r["SkuPriceId"] == "gpu-nvidia-h100-80gb-hbm3-pool-h100-pool-usd-4.0"
        assert r["ListUnitPrice"] == "4.0" and r["ContractedUnitPrice"] == "4.0"
        assert r["PricingUnit"] == "GPU-Hours" and r["ConsumedUnit"] == "GPU-Hours"
        assert r["Tags"] == '{"gpu-cost-exporter/node-pool":"h100-pool"}'
        assert r["AllocatedMethodId"] == "gpu-cost-exporter/gpu-cost-share/v1"
    # A: the pod, 2 GPU-h x 4.00 = 8.00 of 32.00 -> 0.25
    assert pod["ConsumedQuantity"] == pod["PricingQuantity"] == "2.0"
    assert pod["ListCost"] == pod["ContractedCost"] == pod["EffectiveCost"] == pod["BilledCost"] == "8.0"
    assert pod["AllocatedResourceId"] == "k8s://prod-eu1/namespaces/ml-team/pods/trainer-7f9c"
    assert pod["AllocatedResourceName"] == "trainer-7f9c"
    assert pod["AllocatedMethodDetails"] == (
        '{"Elements":[{"AllocatedRatio":0.25,"UsageUnit":"GPU-Hours","UsageQuantity":2.0}]}')
    assert pod["AllocatedTags"] == ('{"gpu-cost-exporter/namespace":"ml-team","gpu-cost-exporter/workload":"trainer",'
                                    '"gpu-cost-exporter/pod":"trainer-7f9c"}')  # no team: none was booked
    assert pod["x_Team"] == ""  # unknown, not guessed
    assert (pod["x_Namespace"], pod["x_WorkloadName"], pod["x_PodName"]) == ("ml-team", "trainer", "trainer-7f9c")
    assert pod["x_AllocatedGpuSeconds"] == "7200.0" and pod["x_UsedGpuSeconds"] == "4320.0"
    assert pod["x_IdleGpuSeconds"] == "2880.0" and pod["x_UnmeasuredGpuSeconds"] == "0.0"
    assert pod["x_IdleCost"] == "3.2"  # 0.8 GPU-h x 4.00
    # B: the unallocated 6 GPU-h x 4.00 = 24.00 of 32.00 -> 0.75
    assert free["ConsumedQuantity"] == free["PricingQuantity"] == "6.0"
    assert free["ListCost"] == free["ContractedCost"] == free["EffectiveCost"] == free["BilledCost"] == "24.0"
    assert free["AllocatedResourceId"] == free["AllocatedResourceName"] == free["AllocatedTags"] == ""
    assert free["AllocatedMethodDetails"] == (
        '{"Elements":[{"AllocatedRatio":0.75,"UsageUnit":"GPU-Hours","UsageQuantity":6.0}]}')
    assert free["x_UnallocatedGpuSeconds"] == "21600.0" and free["x_IdleCost"] == "0.0"
    assert free["x_Namespace"] == ""
    assert_formats(rows)
    assert_focus13_rules(rows)
    assert_reconciles(rows, example_ledger)  # 8 + 24 = 32 = report's total


def test_billed_cost_zero_beside_the_clouds_own_data(example_ledger: Path, tmp_path: Path) -> None:
    """Beside the cloud's FOCUS data the cloud bills the GPUs: BilledCost 0, the cloud as host and issuer,
    EffectiveCost still 8.00 and 24.00."""
    rows = export_rows(example_ledger, tmp_path, "--billed-cost", "zero", "--host-provider", "AWS")
    assert [r["BilledCost"] for r in rows] == ["0.0", "0.0"]
    assert [r["EffectiveCost"] for r in rows] == ["8.0", "24.0"]
    assert {r["HostProviderName"] for r in rows} == {"AWS"} == {r["InvoiceIssuerName"] for r in rows}
    assert {r["ServiceProviderName"] for r in rows} == {"GPU Platform"}


def test_focus_12_projection_drops_the_13_columns(example_ledger: Path, tmp_path: Path) -> None:
    rows = export_rows(example_ledger, tmp_path, "--focus-version", "1.2")
    for col in ("AllocatedMethodId", "AllocatedResourceId", "ServiceProviderName", "HostProviderName"):
        assert col not in rows[0]
    assert rows[0]["ProviderName"] == "GPU Platform" and rows[0]["x_IdleCost"] == "3.2"


def test_metadata_beside_the_export(example_ledger: Path, tmp_path: Path) -> None:
    import json

    export_rows(example_ledger, tmp_path)
    meta = json.loads((tmp_path / "focus.csv.metadata.json").read_text())
    assert meta["Schema"]["FocusVersion"] == "1.3" and meta["ProviderTagPrefixes"] == ["gpu-cost-exporter/"]
    names = [c["ColumnName"] for c in meta["Schema"]["ColumnDefinition"]]
    header = (tmp_path / "focus.csv").read_text().splitlines()[0].split(",")
    assert names == header
    first_custom = next(i for i, n in enumerate(names) if n.startswith("x_"))
    assert all(n.startswith("x_") for n in names[first_custom:])  # FOCUS columns first, then x_
    assert meta["AllocationMethods"][0]["AllocatedMethodId"] == "gpu-cost-exporter/gpu-cost-share/v1"


@pytest.mark.parametrize(("args", "needle"), [
    (["--ledger", "/nonexistent/l.db"], "/nonexistent/l.db: no such ledger"),
    (["--since", "yesterday-ish"], "bad time 'yesterday-ish'"),
    (["--billed-cost", "zero"], "billed cost zero needs the host provider"),
    (["--output", "/nonexistent/dir/o.csv"], "--output /nonexistent/dir/o.csv: no such directory"),
])
def test_bad_input_is_one_line_and_exit_2(example_ledger: Path, tmp_path: Path, args: list[str],
                                          needle: str) -> None:
    base = {"--ledger": str(example_ledger), "--since": "2026-11-03T00:00:00Z", "--until": "2026-11-04T00:00:00Z"}
    base["--output"] = str(tmp_path / "o.csv")
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [x for kv in base.items() for x in kv]
    done = run_cli("export", "--format", "focus-csv", *flat)
    assert done.returncode == 2 and needle in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "o.csv").exists()
