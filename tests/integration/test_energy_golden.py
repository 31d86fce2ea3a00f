"""Energy DCGM did not measure, through the ``simulate`` pipeline (real agents, aggregator, DCGM endpoints):
counted per node, never priced, shown on /metrics and the status page; the energy it did measure is
booked exactly (checked against the DCGM counters' own deltas). Hand arithmetic in each docstring."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import aiohttp
import pytest

from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.status_page import render_status
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z, an hour boundary

SCENARIO = """
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.0
  on_prem:
    - {model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}
nodes:
  - {name: old, model: "NVIDIA A100-SXM4-80GB", gpus: 2, dcgm_energy: false}
  - {name: dc, model: "NVIDIA A100-SXM4-80GB", gpus: 2}
pods:
  - {name: a, namespace: legacy, node: old, gpus: 1, utilization: 0.5}
  - {name: b, namespace: owned, node: dc, gpus: 1, utilization: 0.5}
events:
  - {type: dcgm_down, node: dc, from: 10m, to: 20m}
"""


async def _energy_j(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """DCGM's own energy counter (mJ since boot) per GPU, in joules."""
    async with session.get(url) as resp:
        text = await resp.text()
    return {m.group(1): float(m.group(2)) / 1000.0 for m in re.finditer(
        r'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{.*?UUID="([^"]+)".*\} (\S+)', text)}


async def test_unmeasured_energy_is_counted_per_node_and_never_priced(tmp_path: Path) -> None:
    """old serves no energy field: its 2 GPUs x 3600 s = 7200 GPU-seconds are unmeasured, and its cost is
    capital only: legacy 1 GPU-h x 0.50 = 0.50.
    dc's DCGM is down from 10m to 20m: the ticks at 600, 615, ..., 1185 (40) read nothing, and the one at
    1200 has no reading before it: 41 intervals x 15 s x 2 GPUs = 1230 GPU-seconds unmeasured. The energy
    dc booked (owned + unallocated) is the DCGM deltas outside the gap: (E(585) - E(0)) + (E(3600) - E(1200)),
    summed over its 2 GPUs; the gap's energy is priced at nothing, not charged to the holder afterwards.
    Status page: (7200 + 1230) / 3600 = 2.34 GPU-h on 2 nodes."""
    assert (1185 - 600) // 15 + 1 == 40
    scenario = parse_scenario(SCENARIO, "energy.yaml")
    pipe = Pipeline(scenario, tmp_path / "w", clock=VirtualClock(START), ledger=tmp_path / "ledger.db")
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    readings: dict[int, dict[str, float]] = {}
    try:
        async with aiohttp.ClientSession() as session:
            url = pipe.peers.nodes["dc"].dcgm.url
            assert await _energy_j(session, pipe.peers.nodes["old"].dcgm.url) == {}  # no field served
            for k in range(int(scenario.duration // scenario.tick) + 1):
                await pipe.step(k * scenario.tick)
                if k * 15 in (0, 585, 1200, 3600):
                    readings[k * 15] = await _energy_j(session, url)
        metrics = ExpositionRenderer().render(list(agg.collector.collect())).decode()
        html = await render_status(agg)
    finally:
        await pipe.close()
    assert 'gpucost_unmeasured_energy_seconds_total{node="old"} 7200.0' in metrics
    assert 'gpucost_unmeasured_energy_seconds_total{node="dc"} 1230.0' in metrics
    assert "Energy not measured: 2.34 GPU-h on 2 node(s)" in html and "priced in full" in html
    assert round((7200 + 1230) / 3600, 2) == 2.34
    measured = sum((readings[585][u] - readings[0][u]) + (readings[3600][u] - readings[1200][u]) for u in readings[0])
    db = sqlite3.connect(tmp_path / "ledger.db")
    (booked,) = db.execute("SELECT (SELECT SUM(energy_j) FROM usage WHERE node = 'dc') + "
                           "(SELECT SUM(energy_j) FROM unallocated WHERE node = 'dc')").fetchone()
    booked /= 1000  # the ledger keeps millijoules
    (old_j,) = db.execute("SELECT (SELECT SUM(energy_j) FROM usage WHERE node = 'old') + "
                          "(SELECT SUM(energy_j) FROM unallocated WHERE node = 'old')").fetchone()
    (legacy_cost,) = db.execute("SELECT SUM(cost) FROM usage WHERE namespace = 'legacy'").fetchone()
    legacy_cost /= 1_000_000_000  # and nano-units of money
    db.close()
    assert booked == pytest.approx(measured, rel=1e-9)
    assert old_j == 0.0
    assert legacy_cost == pytest.approx(17520 / (4 * 8760))
