"""One number format and tables a terminal can show: amounts in JSON and CSV as plain decimals with exactly 9
digits and one zero; floats (forecasts, recommendations) made exact first; one name per dimension; tables within
120 columns unless ``wide``; CO2e columns only where some CO2e is known."""

from __future__ import annotations

import json
from decimal import Decimal

from exporter.aggregator.advice.forecasts import as_dict
from exporter.aggregator.ledger.report import DIMENSIONS, GROUPS, ReportRequest, render
from exporter.model.forecast import BurnRate, forecast_month
from exporter.model.wire import exact_numbers, to_json

ZERO_BOOKED = Decimal("0E-9")  # what a sum of booked nano-units reads when it is nothing
ROW = {"namespace": "ml", "allocated_gpu_hours": Decimal("1.5"), "used_gpu_hours": ZERO_BOOKED,
       "idle_gpu_hours": Decimal(0), "cost": Decimal("6.000000000"), "currency": "USD", "co2e_kg": None}


def test_csv_and_json_write_every_amount_alike_and_zero_once() -> None:
    csv_text = render([ROW], "csv")
    assert csv_text.splitlines()[1] == "ml,1.500000000,0.000000000,0.000000000,6.000000000,USD,"
    assert json.loads(render([ROW], "json"))[0]["used_gpu_hours"] == 0
    assert '"used_gpu_hours": 0.000000000' in render([ROW], "json")
    assert '"idle_gpu_hours": 0.000000000' in render([ROW], "json")


def test_floats_become_nine_digit_decimals() -> None:
    """A forecast's 134.65086066102248 is 134.650860661; 1e-05 (json would write an exponent) 0.000010000."""
    assert to_json(exact_numbers({"a": 134.65086066102248, "b": [1e-05, 2], "c": "x"})) == (
        '{"a": 134.650860661, "b": [0.000010000, 2], "c": "x"}')


def test_budget_forecast_json_has_nine_digits() -> None:
    """Spent 100.123456789123 (a float sum) is written 100.123456789 (9 digits, half-even), and no field of the
    row is left a float."""
    f = forecast_month(namespace="ml", currency="USD", spent=100.123456789123, as_of=1796083200.0 + 240 * 3600,
                       budget=None, burn=BurnRate(12.0, 24.0), crossed_at=None)
    assert f is not None
    d = as_dict(f)
    assert d["spent"] == Decimal("100.123456789")
    assert all(not isinstance(v, float) for v in d.values())


def test_gpu_model_is_the_dimension_and_model_its_alias() -> None:
    assert "gpu_model" in DIMENSIONS and "vendor" in DIMENSIONS and "model" not in DIMENSIONS
    both = [ReportRequest.parse(k, since=None, until=None, cluster=None).cols for k in ("gpu_model", "model")]
    assert both[0] == both[1] == ("gpu_model",)
    assert set(DIMENSIONS) | {"model"} == set(GROUPS)


def test_tables_fit_120_columns_unless_wide() -> None:
    wide_row = {"namespace": "a-rather-long-namespace-name", **{f"col_{i}_gpu_hours": Decimal("12345.678") for i in
                                                                range(14)}, "currency": "USD"}
    table = render([wide_row], "table")
    assert max(map(len, table.splitlines())) <= 120 and "more columns with --wide" in table
    assert table.startswith("Namespace") and "Col 0 GPU-h" in table and "_" not in table.splitlines()[0]
    wide = render([wide_row], "table", wide=True)
    assert max(map(len, wide.splitlines())) > 120 and "Col 13 GPU-h" in wide


def test_co2e_columns_only_when_some_co2e_is_known() -> None:
    assert "CO2e" not in render([ROW], "table", wide=True)
    assert "CO2e kg" in render([{**ROW, "co2e_kg": Decimal("0.5")}], "table", wide=True)
