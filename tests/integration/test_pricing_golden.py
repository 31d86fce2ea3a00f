"""Version-2 pricing through the ``simulate`` pipeline (real agents, aggregator and protocols), then the
report, against bills computed by hand (the arithmetic is in each test). The virtual clock starts at
1_800_000_000 = 2027-01-15T08:00:00Z (``simulate`` starts at the current hour; a fixed start lets a
document's ``effective_from`` fall mid-run), an hour boundary, so a 1 h run is exactly one ledger hour."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

START = 1_800_000_000.0
H100 = "NVIDIA H100 80GB HBM3"


def report(ledger: Path, by: str = "namespace") -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(ledger)
    rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), by, since=None, until=None)
    conn.close()
    key = {"namespace": "namespace", "pod": "pod", "node": "node"}[by]
    return {(r["commitment"] if "commitment" in r else r[key]): r for r in rows}


async def run(text: str, ledger: Path) -> None:
    """``simulate``'s loop (every tick from 0 to the end, inclusive) on a clock starting at ``START``."""
    scenario = parse_scenario(text, "golden.yaml")
    with tempfile.TemporaryDirectory(prefix="gce-") as work:
        pipe = Pipeline(scenario, Path(work), clock=VirtualClock(START), ledger=ledger)
        await pipe.start(serve_aggregator=False)
        try:
            for k in range(int(scenario.duration // scenario.tick) + 1):
                await pipe.step(k * scenario.tick)
        finally:
            await pipe.close()


async def simulate(text: str, tmp_path: Path, by: str = "namespace") -> dict[str, dict[str, Any]]:
    await run(text, tmp_path / "ledger.db")
    return report(tmp_path / "ledger.db", by)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "exporter", *args], capture_output=True, text=True, check=False)


def near(got: float, exact: float) -> None:
    assert float(got) == pytest.approx(exact, abs=1e-6), f"{got} vs {exact}"


INSTANCE_AND_SPOT = """
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.0
  models: {"NVIDIA H100 80GB HBM3": 4.0}
  instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
  capacity_types: {spot: 0.35}
nodes:
  - {name: od, model: "NVIDIA H100 80GB HBM3", gpus: 8, labels: {node.kubernetes.io/instance-type: p5.48xlarge}}
  - {name: spot, model: "NVIDIA H100 80GB HBM3", gpus: 8,
     labels: {node.kubernetes.io/instance-type: p5.48xlarge, karpenter.sh/capacity-type: spot}}
pods:
  - {name: a, namespace: on-demand, node: od, gpus: 8, utilization: 0.5}
  - {name: b, namespace: spotty, node: spot, gpus: 8, utilization: 0.5}
"""


async def test_instance_type_price_and_spot_multiplier(tmp_path: Path) -> None:
    """L = 55.04 / 8 = 6.88 per GPU-hour on a p5.48xlarge (not the model's 4.00).
    on-demand: 8 GPU-h x 6.88 = 55.04 list and effective; idle half: 27.52.
    spot: list 55.04, effective 55.04 x 0.35 = 19.264; idle cost at the same effective rate: 9.632."""
    r = await simulate(INSTANCE_AND_SPOT, tmp_path)
    od, spot = r["on-demand"], r["spotty"]
    near(od["allocated_gpu_hours"], 8.0)
    near(od["list_cost"], 8 * 55.04 / 8)
    near(od["cost"], 55.04)
    near(od["idle_cost"], 27.52)
    near(spot["list_cost"], 55.04)
    near(spot["cost"], 55.04 * 0.35)
    assert round(55.04 * 0.35, 3) == 19.264
    near(spot["idle_cost"], 19.264 / 2)
    assert "__unallocated__" not in r


COMMITTED = """
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.0
  models: {"NVIDIA H100 80GB HBM3": 4.0}
  capacity_types: {spot: 0.35}
  commitments:
    - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 6, hourly: 2.10,
       start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}
nodes:
  - {name: od, model: "NVIDIA H100 80GB HBM3", gpus: 8}
  - {name: spot, model: "NVIDIA H100 80GB HBM3", gpus: 8, labels: {cloud.google.com/gke-spot: "true"}}
pods:
  - {name: a, namespace: committed, node: od, gpus: 8, utilization: 1.0}
  - {name: b, namespace: spotty, node: spot, gpus: 8, utilization: 1.0}
"""


async def test_commitment_covers_six_of_eight_and_spot_is_not_counted(tmp_path: Path) -> None:
    """n = 8 non-spot H100s (the 8 spot ones do not count), N = 6: c = 6/8 = 0.75.
    Each on-demand GPU: 0.75 x 2.10 + 0.25 x 4.00 = 1.575 + 1.00 = 2.575; 8 GPU-h = 20.60
    (= 6 x 2.10 + 2 x 4.00 = 12.60 + 8.00). List 8 x 4.00 = 32.00.
    Spot: 8 x 4.00 x 0.35 = 11.20, list 32.00. Nothing unused (6 <= 8)."""
    r = await simulate(COMMITTED, tmp_path)
    near(r["committed"]["cost"], 8 * (0.75 * 2.10 + 0.25 * 4.00))
    near(r["committed"]["cost"], 20.60)
    near(r["committed"]["list_cost"], 32.0)
    near(r["spotty"]["cost"], 11.20)
    near(r["spotty"]["list_cost"], 32.0)
    assert "h100-1yr" not in r


OVERCOMMITTED = """
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.0
  models: {"NVIDIA H100 80GB HBM3": 4.0}
  commitments:
    - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 8, hourly: 2.10,
       start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}
nodes:
  - {name: od, model: "NVIDIA H100 80GB HBM3", gpus: 6}
pods:
  - {name: a, namespace: team, node: od, gpus: 4, utilization: 1.0}
"""


async def test_commitment_larger_than_the_fleet_books_the_unused_part(tmp_path: Path) -> None:
    """N = 8, n = 6: c = min(8, 6) / 6 = 1, every GPU costs 2.10.
    team: 4 GPU-h x 2.10 = 8.40 (list 16.00); unallocated: 2 GPU-h x 2.10 = 4.20 (list 8.00);
    __unused_commitment__ h100-1yr: (8 - 6) x 1 h x 2.10 = 4.20, list 0.
    The hour's total 8.40 + 4.20 + 4.20 = 16.80 = 8 x 2.10, the invoice line."""
    r = await simulate(OVERCOMMITTED, tmp_path)
    near(r["team"]["cost"], 8.40)
    near(r["team"]["list_cost"], 16.0)
    near(r["__unallocated__"]["cost"], 4.20)
    near(r["__unallocated__"]["list_cost"], 8.0)
    unused = r["h100-1yr"]
    assert unused["namespace"] == "__unused_commitment__"
    near(unused["idle_gpu_hours"], 2.0)
    near(unused["cost"], 4.20)
    assert unused["list_cost"] == 0.0
    near(sum(row["cost"] for row in r.values()), 8 * 2.10)


OWNED = """
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.0
  on_prem:
    - {model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}
nodes:
  - {name: dc, model: "NVIDIA A100-SXM4-80GB", gpus: 2}
pods:
  - {name: a, namespace: owned, node: dc, gpus: 1, utilization: 0.5}
"""


async def _energy_counter_j(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """DCGM's own energy counter (mJ since boot) per GPU, in joules, as the endpoint serves it."""
    async with session.get(url) as resp:
        text = await resp.text()
    out = {}
    for line in text.splitlines():
        m = re.match(r'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{.*?UUID="([^"]+)".*\} (\S+)', line)
        if m:
            out[m.group(1)] = float(m.group(2)) / 1000.0
    return out


async def test_owned_gpus_capital_rate_plus_measured_energy(tmp_path: Path) -> None:
    """Capital rate 17520 / (4 x 8760) = 0.50 per GPU-hour: 1 GPU-h -> 0.50, which is also the list cost.
    Energy: the simulated A100 draws 55 W + 0.5 x (400 - 55) W = 227.5 W for 1 h = 819,000 J; DCGM's
    counter of the held GPU must advance by exactly that between the first and the last scrape, and the
    cost adds 819000 / 3.6e6 = 0.2275 kWh x 0.12 x 1.5 = 0.04095 -> cost 0.54095.
    The idle GPU draws 55 W for 1 h = 198,000 J: __unallocated__ pays 0.50 + 198000 / 3.6e6 = 0.055 kWh
    x 0.12 x 1.5 = 0.0099 -> 0.5099. Conservation on the node: the ledger's joules (held + unallocated)
    equal the two DCGM counters' deltas, 819,000 + 198,000 = 1,017,000 J; nothing went unmeasured."""
    assert 17520 / (4 * 8760) == 0.50
    scenario = parse_scenario(OWNED, "owned.yaml")
    pipe = Pipeline(scenario, tmp_path / "w", clock=VirtualClock(START), ledger=tmp_path / "ledger.db")
    await pipe.start(serve_aggregator=False)
    try:
        async with aiohttp.ClientSession() as session:
            url = pipe.peers.nodes["dc"].dcgm.url
            await pipe.step(0.0)
            first = await _energy_counter_j(session, url)
            for k in range(1, int(scenario.duration // scenario.tick) + 1):
                await pipe.step(k * scenario.tick)
            last = await _energy_counter_j(session, url)
    finally:
        await pipe.close()
    deltas = sorted(last[uuid] - first[uuid] for uuid in last)
    held_delta = deltas[-1]  # the held GPU (util 0.5) drew more than the idle one (55 W)
    assert held_delta == pytest.approx(227.5 * 3600, rel=1e-6)
    assert deltas[0] == pytest.approx(55.0 * 3600, rel=1e-6)
    r = report(tmp_path / "ledger.db")
    owned = r["owned"]
    near(owned["list_cost"], 0.50)
    near(owned["cost"], 0.50 + held_delta / 3.6e6 * 0.12 * 1.5)
    near(owned["cost"], 0.54095)
    idle_delta = deltas[0]
    near(r["__unallocated__"]["cost"], 0.50 + idle_delta / 3.6e6 * 0.12 * 1.5)
    near(r["__unallocated__"]["cost"], 0.5099)
    near(r["__unallocated__"]["list_cost"], 0.50)
    db = sqlite3.connect(tmp_path / "ledger.db")
    (held_j,), (idle_j,), (gap,) = (decoded_rows(db.execute(sql))[0] for sql in (  # joules as decimals
        "SELECT SUM(energy_j) FROM usage WHERE node = 'dc'", "SELECT SUM(energy_j) FROM unallocated WHERE node = 'dc'",
        "SELECT COUNT(*) FROM unmeasured_energy_totals"))
    db.close()
    held_j, idle_j = float(held_j), float(idle_j)
    assert held_j == pytest.approx(held_delta, rel=1e-9) and idle_j == pytest.approx(idle_delta, rel=1e-9)
    assert held_j + idle_j == pytest.approx(sum(deltas), rel=1e-9)
    assert sum(deltas) == pytest.approx(1_017_000.0, rel=1e-6)
    assert gap == 0


PRICE_CHANGE = """
tick: 15s
duration: 1h
pricing:
  versions:
    - {currency: USD, default_price: 1.0, models: {"NVIDIA H100 80GB HBM3": 4.0},
       effective_from: "2027-01-01T00:00:00Z"}
    - {currency: USD, default_price: 1.0, models: {"NVIDIA H100 80GB HBM3": 3.0},
       effective_from: "2027-01-15T08:30:00Z"}
nodes:
  - {name: n, model: "NVIDIA H100 80GB HBM3", gpus: 2}
pods:
  - {name: a, namespace: team, node: n, gpus: 2, utilization: 1.0}
"""


async def test_price_change_mid_run_keeps_the_old_price_before_it(tmp_path: Path) -> None:
    """2 GPUs from 08:00 to 09:00; 4.00 until 08:30, 3.00 from then: 2 x 0.5 x 4.00 + 2 x 0.5 x 3.00
    = 4.00 + 3.00 = 7.00 (not 2 x 3.00 = 6.00: booked time keeps the price in force when it ran)."""
    r = await simulate(PRICE_CHANGE, tmp_path)
    near(r["team"]["allocated_gpu_hours"], 2.0)
    near(r["team"]["cost"], 2 * 0.5 * 4.0 + 2 * 0.5 * 3.0)
    near(r["team"]["cost"], 7.0)
    near(r["team"]["list_cost"], 7.0)


WHAT_IF_CLUSTER = """
tick: 15s
duration: 1h
nodes:
  - {name: od, model: "NVIDIA H100 80GB HBM3", gpus: 8, labels: {node.kubernetes.io/instance-type: p5.48xlarge}}
  - {name: spot, model: "NVIDIA H100 80GB HBM3", gpus: 4, labels: {karpenter.sh/capacity-type: spot}}
  - {name: dc, model: "NVIDIA A100-SXM4-80GB", gpus: 2}
pods:
  - {name: a, namespace: train, node: od, gpus: 6, utilization: 0.9}
  - {name: b, namespace: batch, node: spot, gpus: 4, utilization: 0.4}
  - {name: c, namespace: infer, node: dc, gpus: 1, utilization: 0.5}
"""
BOOKED = """
pricing:
  currency: USD
  default_price: 1.0
  models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.5}
"""
WHAT_IF = """
currency: USD
default_price: 1.0
models: {"NVIDIA H100 80GB HBM3": 4.0}
instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
capacity_types: {spot: 0.35}
commitments:
  - {name: h100-3yr, model: "NVIDIA H100 80GB HBM3", gpus: 10, hourly: 1.90,
     start: "2027-01-01T00:00:00Z", end: "2030-01-01T00:00:00Z"}
on_prem:
  - {model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}
"""


@pytest.mark.timeout(240)  # 87 s measured on a loaded 2-core machine (load 13)
async def test_reprice_equals_a_fresh_simulation_under_the_other_document(tmp_path: Path) -> None:
    """The cluster booked at plain model prices, then `report --reprice WHAT_IF`: each row's reprice_cost
    and reprice_list_cost equal cost and list_cost of the same cluster simulated under WHAT_IF, and the
    ledger is left as it was. By hand, under WHAT_IF: train 6 GPU-h at 1.90 (N = 10 >= n = 8 on-demand
    H100s, so c = 1) = 11.40, list 6 x 6.88 = 41.28; batch (spot, no commitment) 4 x 4.00 x 0.35 = 5.60;
    unused commitment (10 - 8) x 1.90 = 3.80; infer 0.50 + energy (227.5 W x 1 h -> 0.04095) = 0.54095."""
    booked, fresh = tmp_path / "booked.db", tmp_path / "fresh.db"
    await run(WHAT_IF_CLUSTER + BOOKED, booked)
    await run(WHAT_IF_CLUSTER + "pricing:\n" + "".join(f"  {line}\n" for line in WHAT_IF.strip().splitlines()), fresh)
    what_if = tmp_path / "what-if.yaml"
    what_if.write_text(WHAT_IF)
    before = booked.read_bytes()
    done = await asyncio.to_thread(cli, "report", "--ledger", str(booked), "--reprice", str(what_if),
                                   "--format", "json")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert booked.read_bytes() == before  # a what-if never writes
    repriced = {r.get("commitment") or r["namespace"]: r for r in json.loads(out)}
    expected = report(fresh)
    assert set(repriced) == set(expected) == {"train", "batch", "infer", "__unallocated__", "h100-3yr"}
    for name, row in expected.items():
        assert repriced[name]["reprice_cost"] == pytest.approx(float(row["cost"]), abs=1e-5), name
        assert repriced[name]["reprice_list_cost"] == pytest.approx(float(row["list_cost"]), abs=1e-5), name
    near(expected["train"]["cost"], 6 * 1.90)
    near(expected["train"]["list_cost"], 6 * 55.04 / 8)
    near(expected["batch"]["cost"], 4 * 4.0 * 0.35)
    near(expected["h100-3yr"]["cost"], 2 * 1.90)
    assert float(expected["infer"]["cost"]) == pytest.approx(0.50 + 227.5 * 3600 / 3.6e6 * 0.12 * 1.5, abs=1e-5)
    near(repriced["train"]["cost"], 6 * 4.0)  # the booked cost is what it was
    bad = await asyncio.to_thread(cli, "report", "--ledger", str(booked), "--reprice", str(tmp_path / "nope.yaml"))
    assert bad.returncode == 2 and "nope.yaml" in bad.stderr


async def test_default_scenario_status_page_and_node_prices(tmp_path: Path) -> None:
    """Three simulated minutes of the built-in scenario (12 intervals of 15 s = 0.05 h per GPU).
    ai-research: sweep 8 spot H100s on p5.48xlarge: 0.4 GPU-h, list 0.4 x 6.88 = 2.752, cost x 0.35
    = 0.9632; pretrain 8 H200s: 0.4 GPU-h, list 0.4 x 5.00 = 2.00, cost 0.4 x 3.50 = 1.40.
    Saved this month = (2.752 - 0.9632) + (2.00 - 1.40) = 2.3888. ai-training pays list: saved 0.
    Pool table, GPU-weighted over each pool's booked node prices (effective / list per GPU-hour):
    research: 8 spot H100s at 6.88 x 0.35 = 2.408 and 8 H200s at 0.75 x 3.00 + 0.25 x 5.00 = 3.50:
    (8 x 2.408 + 8 x 3.50) / 16 = 47.264 / 16 = 2.954, list (8 x 6.88 + 8 x 5.00) / 16 = 95.04 / 16 = 5.94;
    dev: 4 L4s at 0.80 x 0.5 = 0.40, list 0.80; training: 8 H100s at 4.00 / 4.00; inference: 4 A100s at
    2.50 / 2.50; shared: 2 A100s (DRA, HAMi) at 2.50 / 2.50."""
    from exporter.aggregator.web.exposition import ExpositionRenderer
    from exporter.aggregator.web.status_page import render_status
    from exporter.cli import DEFAULT_SCENARIO

    scenario = parse_scenario(DEFAULT_SCENARIO.read_text(), "default.yaml")
    pipe = Pipeline(scenario, tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(13):
            await pipe.step(k * 15)
        html = await render_status(agg)
        metrics = ExpositionRenderer().render(list(agg.collector.collect())).decode()
        async with aiohttp.ClientSession() as session, session.get(
                f"http://{agg.settings.listen}/api/v1/report", params={"by": "namespace"}) as resp:
            api = {r["namespace"]: r for r in await resp.json()}
    finally:
        await pipe.close()
    near(api["ai-research"]["list_cost"], 0.4 * 6.88 + 0.4 * 5.00)
    near(api["ai-research"]["cost"], 0.4 * 6.88 * 0.35 + 0.4 * 3.50)
    assert "below list price this month (commitments, spot, pool prices)" in html
    saved = (0.4 * 6.88 - 0.4 * 6.88 * 0.35) + (0.4 * 5.00 - 0.4 * 3.50)
    assert round(saved, 4) == 2.3888
    research = re.search(r"<tr><td>ai-research</td>(.*?)</tr>", html)
    assert research is not None and "<td>2.3888 USD</td>" in research.group(1)
    training = re.search(r"<tr><td>ai-training</td>(.*?)</tr>", html)
    assert training is not None and "<td>0.0000 USD</td>" in training.group(1)
    assert "<th>effective per GPU-hour</th><th>list per GPU-hour</th>" in html
    pools = dict(re.findall(r"<tr><td>(\w+)</td><td>\d+</td><td>[^<]*<svg.*?</svg></td><td>[\d.]+</td>"
                            r"<td>([\d.]+ USD</td><td>[\d.]+) USD</td></tr>", html))
    assert round((8 * 2.408 + 8 * 3.50) / 16, 4) == 2.954 and round((8 * 6.88 + 8 * 5.00) / 16, 4) == 5.94
    assert pools == {"research": "2.9540 USD</td><td>5.9400", "dev": "0.4000 USD</td><td>0.8000",
                     "training": "4.0000 USD</td><td>4.0000", "inference": "2.5000 USD</td><td>2.5000",
                     "shared": "2.5000 USD</td><td>2.5000"}
    assert ('gpucost_node_gpu_hourly_price{node="gpu-h200-0",gpu_model="NVIDIA H200",capacity_type="on-demand",'
            'pricing_source="commitment"} 3.5') in metrics
    assert ('gpucost_node_gpu_hourly_price{node="gpu-h100-spot-0",gpu_model="NVIDIA H100 80GB HBM3",'
            'capacity_type="spot",pricing_source="instance_type"} 2.408') in metrics
    assert re.search(r'gpucost_list_cost_total\{namespace="ai-research",currency="USD"\} 4\.75', metrics)
