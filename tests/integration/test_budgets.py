"""Budgets end to end: a simulated hour through the real agent and aggregator (namespace annotations over the
real watch), then the metrics, /api/v1/report?view=budgets, the status page and ``report --budgets``.

Cluster: node h100 with 2 x H100 at 4.00/GPU-hour, from 2026-12-10 00:00 UTC for 1 h (15 s ticks).
* ml: pod train holds 2 GPUs all hour -> spent 2 x 4.00 x 1 h = 8.00; its books began at 00:00, so the 24 h
  window covers the 1 booked hour: burn 8.00/h. Left at 01:00: 21 days + 23 h = 527 h.
  Forecast 8 + 8 x 527 = 4224.00. Budget 100 (annotation): (100 - 8) / 8 = 11.5 h after 01:00 -> 12:30,
  crossing day 2026-12-10.
* dev: pod nb holds 1 GPU -> 4.00, burn 4.00/h, forecast 4 + 4 x 527 = 2112.00. Its annotation says 50; the
  chart's value 10000 overrides it: (10000 - 4) / 4 = 2499 h > 527 h -> no crossing this month.
Each figure may be off by one 15 s tick per pod start or end (SCENARIO.md): 1/240 of the hour.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.http import build_app
from exporter.aggregator.web.status_page import render_status
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

H100 = "NVIDIA H100 80GB HBM3"
DEC_10 = 1796860800.0  # 2026-12-10T00:00:00Z
SCENARIO = f"""
tick: 15s
duration: 1h
prices: {{"{H100}": 4.0}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 4}}
namespaces:
  - {{name: ml, monthly_budget: 100}}
  - {{name: dev, monthly_budget: 50}}
pods:
  - {{name: train, namespace: ml, node: h100, gpus: 2, utilization: 0.9}}
  - {{name: nb, namespace: dev, node: h100, gpus: 1, utilization: 0.1}}
"""
ONE_TICK = 1 / 240
HOURS_LEFT = 21 * 24 + 23  # 01:00 on 12-10 to 2027-01-01 00:00


def _series(agg: Any) -> dict[str, float]:
    text: str = ExpositionRenderer().render(list(agg.collector.collect())).decode()
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in text.splitlines()
                                                   if line and not line.startswith("#"))}


async def test_budgets_end_to_end(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    pipe = Pipeline(parse_scenario(SCENARIO, "budgets.yaml"), tmp_path / "sim", clock=VirtualClock(DEC_10),
                    ledger=ledger,
                    aggregator_extra={"budgets": {"dev": 10000}, "forecast_refresh": "15s"})
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(241):
            await pipe.step(k * 15)
        series = _series(agg)
        client = TestClient(TestServer(build_app(agg)))
        await client.start_server()
        try:
            resp = await client.get("/api/v1/report", params={"view": "budgets"})
            api = {r["namespace"]: r for r in await resp.json()}
            bad = await client.get("/api/v1/report", params={"view": "wishes"})
        finally:
            await client.close()
        page = await render_status(agg)
    finally:
        await pipe.close()

    assert series['gpucost_budget{namespace="ml"}'] == 100.0  # the namespace's annotation
    assert series['gpucost_budget{namespace="dev"}'] == 10000.0  # the chart's value wins over its 50
    assert series['gpucost_forecast_month_cost{namespace="ml"}'] == pytest.approx(8.0 + 8.0 * HOURS_LEFT,
                                                                                  rel=ONE_TICK)  # 4224.00
    assert series['gpucost_forecast_month_cost{namespace="dev"}'] == pytest.approx(4.0 + 4.0 * HOURS_LEFT,
                                                                                   rel=ONE_TICK)  # 2112.00
    assert series['gpucost_forecast_budget_crossing_timestamp_seconds{namespace="ml"}'] == DEC_10
    assert 'gpucost_forecast_budget_crossing_timestamp_seconds{namespace="dev"}' not in series
    assert series["gpucost_budget_annotations_invalid_total"] == 0.0

    assert resp.status == 200 and bad.status == 400
    ml = api["ml"]
    assert ml["spent"] == pytest.approx(2 * 4.0 * 1.0, rel=ONE_TICK)  # 8.00
    assert ml["burn_per_hour"] == pytest.approx(8.0, rel=ONE_TICK)
    assert ml["hours_left"] == pytest.approx(HOURS_LEFT)
    assert ml["budget"] == 100.0 and ml["over_budget"] is True and ml["budget_crossing_day"] == "2026-12-10"
    assert ml["currency"] == "USD" and ml["as_of"] == "2026-12-10T01:00:00Z"
    assert api["dev"]["budget_crossing_day"] is None and api["dev"]["over_budget"] is False
    assert "<h2>Budgets</h2>" in page and "<td>ml</td><td>100.00 USD</td>" in page

    # The CLI on the ledger the run wrote: the same numbers, budgets given on the command line.
    out = _cli("report", "--ledger", str(ledger), "--budgets", "--budget", "ml=100", "--format", "json")
    rows = {r["namespace"]: r for r in json.loads(out.stdout)}
    assert rows["ml"]["forecast_month_cost"] == pytest.approx(ml["forecast_month_cost"])
    assert rows["ml"]["budget_crossing_day"] == "2026-12-10" and rows["dev"]["budget"] is None
    month = _cli("report", "--ledger", str(ledger), "--by", "namespace", "--since", "2026-12-01T00:00:00Z",
                 "--format", "json")
    assert {r["namespace"]: r["cost"] for r in json.loads(month.stdout)}["ml"] == pytest.approx(ml["spent"])
    bad_cli = _cli("report", "--ledger", str(ledger), "--budget", "ml=lots")
    assert bad_cli.returncode == 2 and bad_cli.stderr.strip() == (
        "gpu-cost-exporter: error: --budget ml: 'lots' is not a positive amount")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    main = "import sys; from exporter.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", main, *args], capture_output=True, text=True, check=False)
