"""The status page's trend charts and "Savings you can take" in a real headless browser (Debian's
chromium), on the real aggregator of a simulated cluster: the numbers in the SVG of the rendered DOM are
the ledger's, and a screenshot is saved to test-artifacts/status-page-charts.png.

Cluster (virtual clock from 08:00 UTC, 2 simulated hours, 60 s ticks): node h100 with 2 x H100 at 4.00/GPU-hour,
node a100 with 1 x A100-80GB at 3.00. lab/notebook idle on an H100, lab/serve at 8 % on an H100, team-b/batch
at 90 % on the A100. Three days before, team-b is given one booked hour directly (4 GPU-h: 16.00, 4.00 idle)
so the 30-day chart has a past bar.

* notebook: 2 h x 4.00 = 8.00, all idle (0 % used); serve: 8.00, 92 % of it idle = 7.36.
* lab's cost today = 16.00, idle 15.36; team-b's = 2 h x 3.00 = 6.00, 10 % idle = 0.60.
* Savings (right-sizing with 1 h of evidence, as test_recommend.py): notebook scale_to_zero 730 x 4.00 =
  2,920.00 first, serve smaller_gpu 730 x (4.00 - 3.00) = 730.00 second.
Each figure may be off by one tick per pod start (SCENARIO.md): 1/120 of the 2 hours.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporter.aggregator.ledger.store import TickWrite
from exporter.clock import VirtualClock
from exporter.model.books import UsageAmounts, UsageKey
from exporter.model.exact import exact
from exporter.model.rightsizing.types import RuleSettings
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario
from tests.conftest import REPO
from tests.svg_values import svg_values

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium"),
              pytest.mark.timeout(120)]  # 28 s measured on a loaded 2-core machine
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
SCENARIO = f"""
tick: 60s
duration: 3h
prices: {{"{H100}": 4.0, "{A100}": 3.0}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 2}}
  - {{name: a100, model: "{A100}", gpus: 1}}
namespaces: [{{name: lab}}, {{name: team-b}}]
pods:
  - {{name: notebook, namespace: lab, node: h100, gpus: 1, utilization: 0.0}}
  - {{name: serve, namespace: lab, node: h100, gpus: 1, utilization: 0.08}}
  - {{name: batch, namespace: team-b, node: a100, gpus: 1, utilization: 0.9}}
"""
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z
TODAY = "2027-01-15"
PAST_HOUR = int(START) - 3 * 86400  # 2027-01-12T08:00:00Z
TICK = 1 / 120  # one 60 s tick of the 2 hours


def _day(hour: int) -> str:
    return f"{datetime.fromtimestamp(hour, UTC):%Y-%m-%d}"


def _hour(hour: int) -> str:
    return f"{datetime.fromtimestamp(hour, UTC):%Y-%m-%d %H:00} UTC"


def _past() -> TickWrite:
    w = TickWrite()  # 4 GPU-h at 4.00, one of them idle
    w.usage[UsageKey(PAST_HOUR, "team-b", "old-0", "old", "h100", "", H100, "", "", "USD")] = UsageAmounts(
        allocated_s=exact(4 * 3600.0), used_s=exact(3 * 3600.0), unmeasured_s=exact(0.0), idle_s=exact(1 * 3600.0),
            cost=exact(4 * 4.00),
        idle_cost=exact(1 * 4.00), energy_j=exact(0.0), list_cost=exact(4 * 4.00))
    return w


async def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    proc = await asyncio.to_thread(subprocess.run, [CHROMIUM, *FLAGS, *args], capture_output=True, text=True,
                                   timeout=120, check=True)
    return proc.stdout


async def test_charts_in_chromium_match_the_ledger(tmp_path: Path) -> None:
    pipe = Pipeline(parse_scenario(SCENARIO, "charts.yaml"), tmp_path, clock=VirtualClock(START))
    await pipe.start(serve_aggregator=True)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(121):
            await pipe.step(k * 60.0)
        await agg.ledger.commit(_past())
        agg.advice.settings = RuleSettings(min_evidence_hours=1.0)
        await agg.advice.compute(agg.ledger)
        rows = await agg.ledger.query("SELECT namespace, hour, cost, idle_cost, allocated_s, used_s, unmeasured_s "
                                      "FROM usage WHERE cluster = ?", (agg.ledger.cluster,))
        url = f"http://{agg.settings.listen}/"
        profile = tmp_path / "profile"
        dom = await _chromium(f"--user-data-dir={profile}", "--dump-dom", url)
        artifacts = REPO / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        shot = artifacts / "status-page-charts.png"
        await _chromium(f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1400,1900", url)
    finally:
        await pipe.close()
    assert shot.stat().st_size > 10_000
    assert "<script" not in dom and "<h2>Trends</h2>" in dom and "<h2>Savings you can take</h2>" in dom

    # the ledger's own rows, summed here by day and hour
    by_day: dict[tuple[str, str, str], float] = defaultdict(float)
    by_hour: dict[tuple[str, str, str], float] = defaultdict(float)
    fleet: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for ns, hour, cost, idle, allocated, used, unmeasured in rows:
        for key, c in (("cost", float(cost)), ("idle", float(idle)), ("busy", float(cost) - float(idle))):
            by_day[(ns, _day(hour), key)] += c
            if hour >= START:
                by_hour[(ns, _hour(hour), key)] += c
        if hour >= START:
            acc = fleet[_hour(hour)]
            acc[0], acc[1], acc[2] = acc[0] + float(allocated), acc[1] + float(used), acc[2] + float(unmeasured)

    values = svg_values(dom)
    shown = {(v.namespace, v.bucket, v.kind): float(v.value) for v in values if v.chart == "cost-day" and v.value}
    assert {k: v for k, v in shown.items() if v != 0.0} == pytest.approx(dict(by_day))
    shown_h = {(v.namespace, v.bucket, v.kind): float(v.value) for v in values if v.chart == "cost-hour" and v.value}
    assert {k: v for k, v in shown_h.items() if v != 0.0} == pytest.approx(dict(by_hour))
    util = {v.bucket: float(v.value) for v in values if v.chart == "utilisation-hour" and v.kind == "utilisation"}
    assert util == pytest.approx({b: u / (a - m) for b, (a, u, m) in fleet.items()})
    # every day between the past hour's day and today is known and zero; the days before it are unknown
    days = [v for v in values if v.chart == "cost-day" and v.namespace == "team-b" and v.kind in ("cost", "unknown")]
    assert [v.value for v in days[:26]] == [""] * 26 and days[26].bucket == _day(PAST_HOUR)
    assert [float(v.value) for v in days[27:29]] == [0.0, 0.0]

    # and the ledger holds what the scenario says (within a tick per pod)
    assert by_day[("lab", TODAY, "cost")] == pytest.approx(2 * 4.00 + 2 * 4.00, rel=TICK)
    assert by_day[("lab", TODAY, "idle")] == pytest.approx(2 * 4.00 * 1.0 + 2 * 4.00 * 0.92, rel=TICK)
    assert by_day[("team-b", TODAY, "cost")] == pytest.approx(2 * 3.00, rel=TICK)
    assert by_day[("team-b", _day(PAST_HOUR), "cost")] == pytest.approx(4 * 4.00)
    assert by_day[("team-b", _day(PAST_HOUR), "idle")] == pytest.approx(1 * 4.00)

    # savings, biggest first, as the recommendations say
    first, second = dom.index("<td>notebook</td>"), dom.index("<td>serve</td>")
    assert first < second
    assert "scale_to_zero" in dom[first:second] and "2,920.00 USD" in dom[first:second]
    assert "smaller_gpu" in dom[second:] and "730.00 USD" in dom[second:dom.index("</table>", second)]
