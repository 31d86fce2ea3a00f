"""Emissions through the ``simulate`` pipeline (real agents, aggregator, DCGM endpoints): CO2e from the energy
DCGM measured, by hand. Each test's docstring has the arithmetic; the asserts repeat it."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.focus.export import focus_hours, query_of
from exporter.aggregator.focus.ledger_source import Window
from exporter.aggregator.focus.rows import FocusSettings
from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z, an hour boundary

PRICING = """
pricing:
  currency: USD
  default_price: 1.0
  emissions: {grid_g_per_kwh: 400, pue: 1.2, pools: {green: 25}}
"""
NODES = """
tick: 15s
duration: 2h
nodes:
  - {name: n-p, model: "NVIDIA H100 80GB HBM3", gpus: 1, power: {idle_w: 100, max_w: 700}}
  - {name: n-g, model: "NVIDIA H100 80GB HBM3", gpus: 1, power: {idle_w: 100, max_w: 700},
     labels: {gpu.platform/pool: green}}
  - {name: n-old, model: "NVIDIA A100-SXM4-80GB", gpus: 1, dcgm_energy: false}
pods:
  - {name: a, namespace: ml, node: n-p, gpus: 1, utilization: 0.5}
  - {name: b, namespace: eco, node: n-g, gpus: 1, utilization: 0.5}
  - {name: c, namespace: legacy, node: n-old, gpus: 1, utilization: 0.5}
"""


async def _run(text: str, ledger: Path) -> str:
    """``simulate``'s loop (every tick from 0 to the end, inclusive); the aggregator's /metrics at the end."""
    scenario = parse_scenario(text, "emissions.yaml")
    with tempfile.TemporaryDirectory(prefix="gce-") as work:
        pipe = Pipeline(scenario, Path(work), clock=VirtualClock(START), ledger=ledger)
        await pipe.start(serve_aggregator=False)
        try:
            for k in range(int(scenario.duration // scenario.tick) + 1):
                await pipe.step(k * scenario.tick)
            assert pipe.aggregator is not None
            return ExpositionRenderer().render(list(pipe.aggregator.collector.collect())).decode()
        finally:
            await pipe.close()


def _report(ledger: Path, by: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(ledger)
    try:
        return build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), by, since=None, until=None)
    finally:
        conn.close()


def _focus(ledger: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(ledger)
    try:
        return [r for rows in focus_hours(query_of(conn), FocusSettings(), window=Window(None, None)) for r in rows]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def booked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The three-node scenario under ``emissions:``, booked once for the tests below."""
    ledger = tmp_path_factory.mktemp("emissions") / "ledger.db"
    metrics = asyncio.run(_run(PRICING + NODES, ledger))
    return ledger, metrics


def test_a_whole_gpu_at_half_load_emits_192_g_an_hour(booked: tuple[Path, str]) -> None:
    """n-p draws 100 + 0.5 x (700 - 100) = 400 W: 400 x 3600 = 1.44e6 J = 0.4 kWh an hour; at 400 g/kWh and
    PUE 1.2: 0.4 x 1.2 x 400 = 192 g an hour, 384 g = 0.384 kg over the 2 h run; all of its energy measured."""
    ledger, metrics = booked
    assert 100 + 0.5 * (700 - 100) == 400
    assert pytest.approx(0.4) == 400 * 3600 / 3.6e6
    assert pytest.approx(192) == 0.4 * 1.2 * 400
    rows = {r["namespace"]: r for r in _report(ledger, "namespace")}
    assert float(rows["ml"]["co2e_kg"]) == pytest.approx(0.384, rel=1e-9)
    assert rows["ml"]["unmeasured_energy_gpu_hours"] == 0.0
    assert _sample(metrics, "ml") == pytest.approx(384, rel=1e-9)
    conn = sqlite3.connect(ledger)
    per_hour = decoded_rows(conn.execute("SELECT hour, SUM(co2e_g), SUM(energy_j) FROM usage WHERE namespace = 'ml' "
                                         "GROUP BY hour ORDER BY hour"))
    conn.close()
    assert [h for h, _g, _j in per_hour] == [START, START + 3600]
    for _hour, grams, joules in per_hour:
        assert float(joules) == pytest.approx(1.44e6, rel=1e-9)
        assert float(grams) == pytest.approx(192, rel=1e-9)
    focus = [r for r in _focus(ledger) if r.get("x_Namespace") == "ml"]
    assert [r["x_Co2eKg"] for r in focus] == [pytest.approx(Decimal("0.192"), rel=Decimal("1e-9"))] * 2


def _sample(metrics: str, namespace: str) -> float | None:
    """The value of ``gpucost_co2e_grams_total{namespace}``; None when the series is absent."""
    prefix = f'gpucost_co2e_grams_total{{namespace="{namespace}"}} '
    found = [line[len(prefix):] for line in metrics.splitlines() if line.startswith(prefix)]
    return float(found[0]) if found else None


def test_a_pool_intensity_overrides_the_grid(booked: tuple[Path, str]) -> None:
    """n-g is in pool green (25 g/kWh): the same 0.8 kWh x 1.2 x 25 = 24 g over the run."""
    ledger, metrics = booked
    assert pytest.approx(24) == 0.8 * 1.2 * 25
    rows = {r["namespace"]: r for r in _report(ledger, "namespace")}
    assert float(rows["eco"]["co2e_kg"]) == pytest.approx(0.024, rel=1e-9)
    assert _sample(metrics, "eco") == pytest.approx(24, rel=1e-9)


def test_energy_not_measured_has_unknown_co2e_and_its_hours_counted(booked: tuple[Path, str]) -> None:
    """n-old serves no energy counter: legacy's 2 GPU-h have no CO2e (null, not 0) and count as 2 GPU-h of
    energy not measured; per node the same; no series for legacy on /metrics."""
    ledger, metrics = booked
    rows = {r["namespace"]: r for r in _report(ledger, "namespace")}
    assert rows["legacy"]["co2e_kg"] is None
    assert float(rows["legacy"]["unmeasured_energy_gpu_hours"]) == pytest.approx(2.0, rel=1e-9)
    assert float(rows["legacy"]["allocated_gpu_hours"]) == pytest.approx(2.0, rel=1e-9)
    assert _sample(metrics, "legacy") is None
    by_node = {r["node"]: r for r in _report(ledger, "node")}
    assert by_node["n-old"]["co2e_kg"] is None
    assert float(by_node["n-old"]["unmeasured_energy_gpu_hours"]) == pytest.approx(2.0, rel=1e-9)
    assert float(by_node["n-p"]["co2e_kg"]) == pytest.approx(0.384, rel=1e-9)
    legacy = [r for r in _focus(ledger) if r.get("x_Namespace") == "legacy"]
    assert legacy and all(r["x_Co2eKg"] is None for r in legacy)


async def test_without_an_emissions_section_nothing_is_reported(tmp_path: Path) -> None:
    """The same cluster priced without ``emissions:`` (1 h): no co2e_kg on any row, no x_Co2eKg, no
    gpucost_co2e_grams_total series; the energy is still booked (0.4 kWh = 1.44e6 J for ml)."""
    text = (PRICING.replace("  emissions: {grid_g_per_kwh: 400, pue: 1.2, pools: {green: 25}}\n", "")
            + NODES.replace("duration: 2h", "duration: 1h"))
    assert "emissions" not in text
    metrics = await _run(text, tmp_path / "ledger.db")
    rows = _report(tmp_path / "ledger.db", "namespace")
    assert {r["namespace"] for r in rows} >= {"ml", "eco", "legacy"}
    assert all(r["co2e_kg"] is None for r in rows)
    assert "gpucost_co2e_grams_total" not in metrics
    assert all(r.get("x_Co2eKg") is None for r in _focus(tmp_path / "ledger.db"))
    conn = sqlite3.connect(tmp_path / "ledger.db")
    ((joules,),) = decoded_rows(conn.execute("SELECT SUM(energy_j) FROM usage WHERE namespace = 'ml'"))
    conn.close()
    assert float(joules) == pytest.approx(1.44e6, rel=1e-9)
