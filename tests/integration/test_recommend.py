"""Right-sizing end to end: a simulated cluster through the real agents (framebuffer peaks), the real
aggregator (evidence booked with the deltas, schema 5), then the CLI, the HTTP route and the metric.

Cluster (1 simulated hour, 15 s ticks): node h100 with 2 x H100 at 4.00/GPU-hour, node a100 with 1 x A100-80GB
at 3.00. The simulator's DCGM reports 300 MiB + 70 % of the framebuffer used on a held GPU:
H100 (81559 MiB) -> int(300 + 57091.3) = 57391 MiB = 56.0 GiB.

* notebook (H100, 0 %): p95 bucket 1 % <= 5 % -> scale_to_zero: now 4.00 x 730 = 2920.00, after 0.
* serve (H100, 8 %): p95 bucket 10 %: demand 0.10 x 989 = 98.9 TFLOPS <= 0.8 x 312 = 249.6 on an A100 (held
  in the cluster by batch, at 3.00); memory 56.0 GiB x 1.2 = 67.3 GiB = 72.2e9 <= 80e9 -> smaller_gpu:
  now 2920.00, after 3.00 x 730 = 2190.00, savings 730.00.
* batch (A100, 90 %): nothing cheaper holds it -> no row.
Each figure may be off by one 15 s tick per pod start or end (SCENARIO.md): 1/240 of the hour.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from exporter.aggregator.advice.recommendations import recommendations
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.http import build_app
from exporter.clock import VirtualClock
from exporter.model.rightsizing.types import Action, RuleSettings
from exporter.pipeline import Pipeline, run_simulation
from exporter.sim.scenario import parse_scenario
from tests.ledger_versions import back_to

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
SCENARIO = f"""
tick: 15s
duration: 1h
prices: {{"{H100}": 4.0, "{A100}": 3.0}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 2}}
  - {{name: a100, model: "{A100}", gpus: 1}}
pods:
  - {{name: notebook, namespace: lab, node: h100, gpus: 1, utilization: 0.0}}
  - {{name: serve, namespace: lab, node: h100, gpus: 1, utilization: 0.08}}
  - {{name: batch, namespace: lab, node: a100, gpus: 1, utilization: 0.9}}
"""
ONE_TICK = 1 / 240  # of an hour
ONE_HOUR = RuleSettings(min_evidence_hours=1.0)


@pytest.fixture(scope="module")
def ledger() -> Path:
    import asyncio

    work = Path(tempfile.mkdtemp(prefix="gce-rec-"))
    path = work / "ledger.db"
    asyncio.run(run_simulation(parse_scenario(SCENARIO, "recommend.yaml"), path, workdir=work / "sim"))
    return path


def _query(path: Path) -> Any:
    conn = sqlite3.connect(path)
    return lambda sql, params: decoded_rows(conn.execute(sql, tuple(params)))  # amounts as decimals


def test_evidence_rows_carry_utilisation_and_framebuffer_peaks(ledger: Path) -> None:
    """serve's hour(s): all measured seconds in the [5 %, 10 %) bucket; its peak 57391 MiB."""
    conn = sqlite3.connect(ledger)
    (version,) = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    s010, others, peak = conn.execute(
        "SELECT SUM(s_u010), SUM(s_u001 + s_u002 + s_u005 + s_u015 + s_u100), MAX(fb_peak_bytes) FROM evidence "
        "WHERE pod = 'serve'").fetchone()
    assert version == str(SCHEMA_VERSION)
    assert s010 == pytest.approx(3600.0, abs=15.0) and others == 0
    assert peak == 57391 * 1048576


def test_rules_on_the_simulated_ledger(ledger: Path) -> None:
    rows = {r.workload: r for r in recommendations(_query(ledger), cluster="default", settings=ONE_HOUR)}
    assert set(rows) == {"notebook", "serve"}  # batch is busy: no row
    nb, serve = rows["notebook"], rows["serve"]
    assert nb.action is Action.SCALE_TO_ZERO
    assert nb.monthly_cost_now == pytest.approx(2920.0, rel=ONE_TICK)
    assert nb.monthly_savings == pytest.approx(2920.0, rel=ONE_TICK)
    assert serve.action is Action.SMALLER_GPU and serve.target.gpu_model == A100
    assert serve.monthly_cost_after == pytest.approx(2190.0, rel=ONE_TICK)
    assert serve.monthly_savings == pytest.approx(730.0, abs=2920.0 * ONE_TICK + 2190.0 * ONE_TICK)
    assert serve.evidence.util_p95 == pytest.approx(0.10)
    # The default (24 h of evidence) refuses a one-hour ledger.
    assert recommendations(_query(ledger), cluster="default") == []


def test_cli_json_and_csv(ledger: Path) -> None:
    base = [sys.executable, "-c", "import sys; from exporter.cli import main; sys.exit(main(sys.argv[1:]))",
            "recommend", "--ledger", str(ledger), "--min-evidence", "1h"]
    out = subprocess.run([*base, "--format", "json"], capture_output=True, text=True, check=True).stdout
    rows = {r["workload"]: r for r in json.loads(out)}
    assert rows["serve"]["action"] == "smaller_gpu" and rows["serve"]["currency"] == "USD"
    assert rows["serve"]["current"] == {"gpu_model": H100, "mig_profile": None, "gpus": 1, "replicas": None}
    assert set(rows["serve"]["evidence"]) == {"util_p50", "util_p95", "framebuffer_peak_bytes", "hours_observed"}
    csv_out = subprocess.run([*base, "--format", "csv"], capture_output=True, text=True, check=True).stdout
    assert csv_out.splitlines()[0].startswith("namespace,workload,action,current,target")
    bad = subprocess.run([*base, "--window", "soon"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--window" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


async def test_route_and_metric_on_a_running_aggregator(tmp_path: Path) -> None:
    """The aggregator of a pipeline after 5 simulated minutes: the route answers with the short settings, and
    the metric shows what the last hourly refresh (the first commit's) found: nothing yet with 24 h required."""
    pipe = Pipeline(parse_scenario(SCENARIO, "recommend.yaml"), tmp_path, clock=VirtualClock(1_800_000_000.0))
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(21):
            await pipe.step(k * 15)
        client = TestClient(TestServer(build_app(agg)))
        await client.start_server()
        try:
            params = {"window": "1h", "min_evidence": "0s"}
            resp = await client.get("/api/v1/recommendations", params=params)
            body = await resp.json()
            bad = await client.get("/api/v1/recommendations", params={"window": "tomorrow"})
            # since/until as in /api/v1/report; the books run 08:00-08:05 (1_800_000_000 = 2027-01-15T08:00:00Z)
            windows = {}
            for name, extra in (("from_start", {"since": "2027-01-15T08:00:00Z"}),
                                ("after_books", {"since": "2027-01-15T09:00:00Z"}),
                                ("before_books", {"until": "2027-01-15T08:00:00Z"}),
                                ("bad_since", {"since": "soon"}),
                                ("backwards", {"since": "2027-01-15T08:05:00Z", "until": "2027-01-15T08:00:00Z"})):
                answer = await client.get("/api/v1/recommendations", params={**params, **extra})
                windows[name] = (answer.status, await answer.json())
        finally:
            await client.close()
        assert resp.status == 200 and {r["workload"]: r["action"] for r in body} == {
            "notebook": "scale_to_zero", "serve": "smaller_gpu"}
        assert bad.status == 400
        assert windows["from_start"] == (200, body)  # since at the books' start: the same window
        assert windows["after_books"] == (200, []) and windows["before_books"] == (200, [])  # nothing booked in it
        assert windows["bad_since"][0] == 400 and windows["bad_since"][1]["error"].startswith("since: bad time")
        assert windows["backwards"] == (400, {"error": "until is before since"})
        assert "gpucost_recommendation_monthly_savings" not in _series(agg)
        agg.advice.settings = RuleSettings(min_evidence_hours=0.0)
        await agg.advice.compute(agg.ledger)
        text = _series(agg)
    finally:
        await pipe.close()
    assert 'gpucost_recommendation_monthly_savings{namespace="lab",workload="notebook",action="scale_to_zero"} 2920.0' \
        in text.splitlines()


def _series(agg: Any) -> str:
    text: str = ExpositionRenderer().render(list(agg.collector.collect())).decode()
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


async def test_the_daemons_settings_set_window_evidence_and_refresh(tmp_path: Path) -> None:
    """GPUCOST_RECOMMEND_MIN_EVIDENCE=1m, _REFRESH=0s: after 5 simulated minutes the metric already carries the
    notebook's scale_to_zero (2,920.00 a month = 4.00 x 730) without anyone asking, and the route without
    parameters answers with the daemon's settings (the defaults, 24 h of evidence, would give nothing)."""
    extra = {"recommend_window": 3600.0, "recommend_min_evidence": 60.0, "recommend_refresh": 0.0}
    pipe = Pipeline(parse_scenario(SCENARIO, "recommend.yaml"), tmp_path, clock=VirtualClock(1_800_000_000.0),
                    aggregator_extra=extra)
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(21):
            await pipe.step(k * 15)
        text = _series(agg)
        client = TestClient(TestServer(build_app(agg)))
        await client.start_server()
        try:
            body = await (await client.get("/api/v1/recommendations")).json()
        finally:
            await client.close()
    finally:
        await pipe.close()
    assert 'gpucost_recommendation_monthly_savings{namespace="lab",workload="notebook",action="scale_to_zero"} 2920.0' \
        in text.splitlines()
    assert {r["workload"]: r["action"] for r in body} == {"notebook": "scale_to_zero", "serve": "smaller_gpu"}


def test_schema_4_ledger_migrates_to_5(tmp_path: Path) -> None:
    """A ledger an older build wrote (no evidence table, version 4) gains the table on open; rows are kept."""
    path = tmp_path / "old.db"
    ledger = Ledger(path)
    ledger.open_sync()
    ledger.backend.close()
    conn = sqlite3.connect(path)
    for statement in back_to(4):  # no evidence table, nor any later schema's tables and columns
        conn.execute(statement)
    conn.commit()
    conn.close()
    again = Ledger(path)
    again.open_sync()
    again.backend.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert conn.execute("SELECT COUNT(*) FROM evidence").fetchone() == (0,)


def test_evidence_upsert_adds_seconds_and_keeps_the_larger_peak(tmp_path: Path) -> None:
    """Two commits on one hour x device: 30 s + 45 s at 3 % (bucket 5 %), peaks 5 GiB then 3 GiB then
    unmeasured: 75 s in s_u005, peak 5 GiB (a maximum, so booking a peak again changes nothing)."""
    from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
    from exporter.aggregator.ledger.rows import TickWrite
    from exporter.model.rightsizing.evidence import UtilHistogram

    ledger = Ledger(tmp_path / "l.db")
    ledger.open_sync()
    key = EvidenceKey(1_800_000_000, "lab", "p", "w", "n", H100, "", "gpu", "GPU-a")
    for seconds, peak in ((30.0, 5 * 2**30), (45.0, 3 * 2**30), (0.0, None)):
        w = TickWrite()
        w.evidence[key] = EvidenceRow(1.0, UtilHistogram.of([(0.03, seconds)]), peak)
        ledger.commit_sync(w)
    ledger.backend.close()
    row = sqlite3.connect(tmp_path / "l.db").execute("SELECT s_u005, s_u001, fb_peak_bytes FROM evidence").fetchall()
    assert row == [(75.0, 0.0, 5 * 2**30)]
