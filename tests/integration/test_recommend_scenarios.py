"""Right-sizing driven by scenarios: pods' `framebuffer` and per-device `utilization` go through the
simulator's DCGM text, the real agents (framebuffer peaks per holder) and the real aggregator (evidence in the
ledger), then `gpu-cost-exporter recommend` with a short window and minimum evidence (1 h, 30 min).

Cluster (1 simulated hour, 15 s ticks), prices per GPU-hour: H100 4.00, A100-80GB 2.50, L4 0.80. MIG instances
are priced at their slices: A100 1g.10gb 2.50 x 1/7, 2g.20gb 2.50 x 2/7 an hour; a 1/4 time-sliced L4
replica 0.80 x 1/4 = 0.20. A month is 730 hours; every pod runs the whole hour unless said otherwise.

* notebook (1 H100, 0 %): idle -> scale_to_zero, 4.00 x 730 = 2920.00 a month saved.
* ddp (4 H100, per_device [0.9, 0.9, 0, 0]): 2 devices busy -> fewer_gpus 2:
  now 4 x 4.00 x 730 = 11680.00, after 4 x 2/4 x 4.00 x 730 = 5840.00.
* train (2 H100 at 92 %): busy -> no row.
* serve (1 A100, 8 %, 6 GiB): p95 bucket 10 %: 0.10 x 312 TFLOPS = 31.2 <= 0.8 x 1/7 x 312 = 35.66, and
  6 GiB x 1.2 = 7.73e9 <= 10e9 bytes -> mig 1g.10gb: now 2.50 x 730 = 1825.00, after 2.50 x 1/7 x 730 = 260.71.
* big (1 A100, 8 %, 30 GiB): 30 GiB x 1.2 = 38.65e9 bytes; the cluster's profiles hold 10e9 (1g.10gb) and
  20e9 (2g.20gb); 3g.40gb would fit but nobody holds one -> no mig row (and nothing else fits: no row).
* embed (1g.10gb, 30 %, 8 GiB) and rank (2g.20gb, 50 %, 12 GiB): nothing smaller or cheaper fits -> no row.
* dev-idle (a 1/4 L4 replica, 0 % from 30m): scale_to_zero; now 0.20 x 0.5 h / 1 h window x 730 = 73.00;
  0.5 h observed. Its memory on the time-sliced GPU is the GPU's, not the pod's: unmeasured, said so.
* dev-light (a 1/4 L4 replica alone on its GPU, 8 %, 6 GiB): memory unmeasured, busy -> no row.
Whole-hour figures come out exact; dev-idle's start may be off by one 15 s tick (SCENARIO.md).

A second cluster (SPAN, 2 simulated hours, 4 x H100 at 4.00) pins pooling and `--since/--until`: web, a
Deployment of 2 replicas (web-0 at 0 %, 2 GiB; web-1 at 3 %, 5 GiB) the whole run; early (a Job) the first
hour only, late (a Job) the second hour only; all idle, so each row is scale_to_zero.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from exporter.pipeline import run_simulation
from exporter.sim.scenario import parse_scenario

pytestmark = pytest.mark.timeout(300)  # up to 100 s a test (setup included) measured on a loaded machine

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
GIB = 2**30
MONTH_H = 730.0
TICK_OF_HALF_HOUR = 15.0 / 1800.0  # one tick, relative to dev-idle's half hour
SCENARIO = f"""
tick: 15s
duration: 1h
prices: {{"{H100}": 4.0, "{A100}": 2.5, "{L4}": 0.8}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 8}}
  - {{name: a100, model: "{A100}", gpus: 2}}
  - {{name: a100-mig, model: "{A100}", gpus: 1, mig: {{0: [2g.20gb, 1g.10gb]}}}}
  - {{name: l4-a, model: "{L4}", gpus: 1, time_slicing: 4}}
  - {{name: l4-b, model: "{L4}", gpus: 1, time_slicing: 4}}
pods:
  - {{name: notebook-0, namespace: lab, node: h100, owner: {{kind: StatefulSet, name: notebook}}, gpus: 1,
     utilization: 0.0, framebuffer: 2GiB}}
  - {{name: ddp-0, namespace: lab, node: h100, owner: {{kind: Job, name: ddp}}, gpus: 4,
     utilization: {{per_device: [0.9, 0.9, 0.0, 0.0]}}, framebuffer: 40GiB}}
  - {{name: train-0, namespace: train, node: h100, owner: {{kind: Job, name: train}}, gpus: 2, utilization: 0.92,
     framebuffer: [{{at: 0m, value: 50GiB}}, {{at: 20m, value: 70GiB}}]}}
  - {{name: serve-0, namespace: infer, node: a100, owner: {{kind: Deployment, name: serve}}, gpus: 1,
     utilization: 0.08, framebuffer: 6GiB}}
  - {{name: big-0, namespace: infer, node: a100, owner: {{kind: Deployment, name: big}}, gpus: 1,
     utilization: 0.08, framebuffer: 30GiB}}
  - {{name: embed-0, namespace: infer, node: a100-mig, owner: {{kind: Deployment, name: embed}},
     resource: nvidia.com/mig-1g.10gb, utilization: 0.3, framebuffer: 8GiB}}
  - {{name: rank-0, namespace: infer, node: a100-mig, owner: {{kind: Deployment, name: rank}},
     resource: nvidia.com/mig-2g.20gb, utilization: 0.5, framebuffer: 12288MiB}}
  - {{name: dev-idle-0, namespace: dev, node: l4-a, owner: {{kind: StatefulSet, name: dev-idle}}, start: 30m,
     utilization: 0.0, framebuffer: 3GiB}}
  - {{name: dev-light-0, namespace: dev, node: l4-b, owner: {{kind: StatefulSet, name: dev-light}},
     utilization: 0.08, framebuffer: 6GiB}}
"""


def _simulate(text: str, name: str) -> Path:
    work = Path(tempfile.mkdtemp(prefix="gce-recsim-"))
    path = work / "ledger.db"
    asyncio.run(run_simulation(parse_scenario(text, name), path, workdir=work / "sim"))
    return path


def _run(ledger: Path, window: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from exporter.cli import main; sys.exit(main(sys.argv[1:]))",
         "recommend", "--ledger", str(ledger), "--window", window, "--min-evidence", "30m", "--format", "json",
         *flags], capture_output=True, text=True, check=False)


def _recommend(ledger: Path, window: str = "1h", *flags: str) -> dict[str, dict[str, Any]]:
    """`recommend --window W --min-evidence 30m --format json [flags]`, by workload."""
    proc = _run(ledger, window, *flags)
    assert proc.returncode == 0, proc.stderr
    return {r["workload"]: r for r in json.loads(proc.stdout)}


@pytest.fixture(scope="module")
def ledger() -> Path:
    return _simulate(SCENARIO, "recsim.yaml")


@pytest.fixture(scope="module")
def rows(ledger: Path) -> dict[str, dict[str, Any]]:
    return _recommend(ledger)


def _evidence(ledger: Path, pod: str) -> list[tuple[float, float, float | None]]:
    """Per device of ``pod``: seconds below 1 %, seconds in [90 %, 100 %], framebuffer peak (all hours)."""
    conn = sqlite3.connect(ledger)
    try:
        return [(a, b, p) for a, b, p in conn.execute(
            "SELECT SUM(s_u001), SUM(s_u100), MAX(fb_peak_bytes) FROM evidence WHERE pod = ? GROUP BY device "
            "ORDER BY SUM(s_u100) DESC", (pod,))]
    finally:
        conn.close()


def test_only_the_expected_workloads_get_a_row(rows: dict[str, dict[str, Any]]) -> None:
    """train (busy), big (no profile holds 30 GiB x 1.2), embed, rank and dev-light: no row."""
    assert set(rows) == {"notebook", "ddp", "serve", "dev-idle"}


def test_inference_at_8_percent_with_6_gib_moves_to_a_1g_10gb_instance(ledger: Path,
                                                                      rows: dict[str, dict[str, Any]]) -> None:
    """The agent measured 6 GiB on serve's whole GPU; 1g.10gb (the smallest that fits) saves most."""
    serve = rows["serve"]
    assert serve["action"] == "mig"
    assert serve["current"] == {"gpu_model": A100, "mig_profile": None, "gpus": 1, "replicas": None}
    assert serve["target"] == {"gpu_model": A100, "mig_profile": "1g.10gb", "gpus": 1, "replicas": None}
    assert serve["evidence"]["framebuffer_peak_bytes"] == 6 * GIB
    assert serve["evidence"]["util_p95"] == pytest.approx(0.10)  # 8 % lies in the [5 %, 10 %) bucket
    assert serve["monthly_cost_now"] == pytest.approx(2.50 * MONTH_H, abs=0.005)  # 1825.00
    assert serve["monthly_cost_after"] == pytest.approx(round(2.50 * 1 / 7 * MONTH_H, 2), abs=0.005)  # 260.71
    assert serve["monthly_savings"] == pytest.approx(round(2.50 * 6 / 7 * MONTH_H, 2), abs=0.01)  # 1564.29
    assert "1g.10gb" in serve["reason"] and "6.0 GiB" in serve["reason"]
    assert _evidence(ledger, "serve-0")[0][2] == 6 * GIB


def test_four_gpu_pod_with_two_idle_devices_keeps_two(ledger: Path, rows: dict[str, dict[str, Any]]) -> None:
    """per_device [0.9, 0.9, 0, 0] reaches DCGM per device: two devices' hour in the top bucket, two below
    1 %; the rule keeps the 2 busy GPUs."""
    devices = _evidence(ledger, "ddp-0")
    assert [(below_1, top) for below_1, top, _fb in devices] == [(0.0, 3600.0), (0.0, 3600.0),
                                                                 (3600.0, 0.0), (3600.0, 0.0)]
    assert {fb for _a, _b, fb in devices} == {40 * GIB}
    ddp = rows["ddp"]
    assert ddp["action"] == "fewer_gpus"
    assert (ddp["current"]["gpus"], ddp["target"]["gpus"]) == (4, 2)
    assert ddp["monthly_cost_now"] == pytest.approx(4 * 4.00 * MONTH_H)  # 11680.00
    assert ddp["monthly_cost_after"] == pytest.approx(4 * 2 / 4 * 4.00 * MONTH_H)  # 5840.00
    assert ddp["monthly_savings"] == pytest.approx(5840.00)


def test_idle_notebook_scales_to_zero(rows: dict[str, dict[str, Any]]) -> None:
    nb = rows["notebook"]
    assert nb["action"] == "scale_to_zero" and nb["target"]["gpus"] == 0
    assert nb["evidence"]["util_p95"] <= 0.05
    assert nb["monthly_cost_now"] == pytest.approx(4.00 * MONTH_H)  # 2920.00
    assert nb["monthly_cost_after"] == 0.0
    assert nb["monthly_savings"] == pytest.approx(2920.00)
    assert nb["evidence"]["framebuffer_peak_bytes"] == 2 * GIB


def test_busy_training_job_gets_no_row(ledger: Path, rows: dict[str, dict[str, Any]]) -> None:
    """92 % on both GPUs; its framebuffer steps 50 GiB -> 70 GiB at 20m: the peak is the larger."""
    assert "train" not in rows
    assert {fb for _a, _b, fb in _evidence(ledger, "train-0")} == {70 * GIB}


def test_no_mig_row_when_no_offered_profile_holds_the_memory(ledger: Path, rows: dict[str, dict[str, Any]]) -> None:
    """big has serve's utilisation (8 %) but 30 GiB: 1g.10gb and 2g.20gb are too small, so no mig row; the
    MIG instances' own memory is measured per instance (embed 8 GiB on its 1g.10gb)."""
    assert _evidence(ledger, "big-0")[0][2] == 30 * GIB
    assert _evidence(ledger, "embed-0")[0][2] == 8 * GIB
    assert _evidence(ledger, "rank-0")[0][2] == 12 * GIB
    assert all(not (r["workload"] == "big" and r["action"] == "mig") for r in rows.values())
    assert "big" not in rows


def test_time_sliced_memory_is_unknown_and_said_so(ledger: Path, rows: dict[str, dict[str, Any]]) -> None:
    """DCGM serves 3 GiB / 6 GiB on the two L4s, but a time-sliced GPU's memory is not one pod's: the ledger
    keeps no peak, the row says "unmeasured" instead of a number, and a busy replica gets no row (only
    idleness is certain on a shared GPU). dev-idle held its 1/4 replica for the last half hour only."""
    assert [fb for _a, _b, fb in _evidence(ledger, "dev-idle-0")] == [None]
    assert [fb for _a, _b, fb in _evidence(ledger, "dev-light-0")] == [None]
    idle = rows["dev-idle"]
    assert idle["action"] == "scale_to_zero"
    assert idle["current"] == {"gpu_model": L4, "mig_profile": None, "gpus": 1, "replicas": 4}
    assert idle["evidence"]["framebuffer_peak_bytes"] is None
    assert "memory" in idle["reason"] and "not measured" in idle["reason"]
    assert idle["evidence"]["hours_observed"] == pytest.approx(0.5, rel=TICK_OF_HALF_HOUR)
    assert idle["monthly_cost_now"] == pytest.approx(0.80 * 1 / 4 * 0.5 / 1.0 * MONTH_H,  # 73.00
                                                     rel=TICK_OF_HALF_HOUR)
    assert "dev-light" not in rows


def test_a_window_shorter_than_an_hour_covers_the_whole_hour(ledger: Path, rows: dict[str, dict[str, Any]]) -> None:
    """The ledger's rows are hourly: `--window 30m` starts at the hour 30 minutes back falls in (0:00 here), so
    the pace is the hour's cost over that hour, 4.00 x 730 = 2920.00 for the notebook, not the hour's cost over
    half an hour (5840.00)."""
    short = _recommend(ledger, "30m")
    assert short["notebook"]["monthly_cost_now"] == pytest.approx(4.00 * MONTH_H)
    assert {w: r["monthly_savings"] for w, r in short.items()} == {w: r["monthly_savings"] for w, r in rows.items()}


PRICED = f"""
tick: 15s
duration: 1h
pricing:
  currency: USD
  default_price: 1.00
  models: {{"{H100}": 4.00, "{A100}": 2.50, "NVIDIA H200": 5.00}}
  pools: {{premium: 1.2}}
  commitments:
    - {{name: h200-1yr, model: "NVIDIA H200", gpus: 6, hourly: 3.00,
       start: "2026-01-01T00:00:00Z", end: "2036-01-01T00:00:00Z"}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 1}}
  - {{name: h200, model: "NVIDIA H200", gpus: 8}}
  - {{name: a100, model: "{A100}", gpus: 1}}
  - {{name: a100-mig, model: "{A100}", gpus: 1, mig: {{0: [1g.10gb]}}, labels: {{gpu.platform/pool: premium}}}}
pods:
  - {{name: finetune-0, namespace: ml, node: h100, owner: {{kind: Job, name: finetune}}, utilization: 0.75,
     framebuffer: 72GiB}}
  - {{name: pretrain-0, namespace: ml, node: h200, owner: {{kind: Job, name: pretrain}}, gpus: 8, utilization: 0.9,
     framebuffer: 120GiB}}
  - {{name: serve-0, namespace: ml, node: a100, owner: {{kind: Deployment, name: serve}}, utilization: 0.08,
     framebuffer: 6GiB}}
  - {{name: embed-0, namespace: ml, node: a100-mig, owner: {{kind: Deployment, name: embed}},
     resource: nvidia.com/mig-1g.10gb, utilization: 0.3, framebuffer: 4GiB}}
"""


def test_targets_are_priced_at_the_margin_not_at_a_discount_already_used() -> None:
    """6 of the 8 H200s are committed at 3.00, list 5.00: each H200 hour is booked at 0.75 x 3.00 + 0.25 x
    5.00 = 3.50, but the commitment is used up, so one more H200 hour costs 5.00 (list). finetune (H100 at
    75 %, p95 bucket 80 %: 0.8 x 989 = 791.2 TFLOPS <= 0.8 x 989 on an H200; 72 GiB x 1.2 = 92.8e9 <= 141e9)
    fits an H200, but 5.00 > 4.00 saves nothing: no row (priced at 3.50 it would claim (4.00 - 3.50) x 730 =
    365.00). The only 1g.10gb instance is in a premium pool (x 1.2): booked at 2.50 x 1/7 x 1.2 = 0.4286 an
    hour, above its list 2.50 x 1/7 = 0.3571, so serve's mig row is after 2.50 x 1/7 x 1.2 x 730 = 312.86,
    savings 2.50 x 730 - 312.86 = 1512.14 (at list it would claim 1564.29)."""
    rows = _recommend(_simulate(PRICED, "priced.yaml"))
    assert set(rows) == {"serve"}
    serve = rows["serve"]
    assert serve["action"] == "mig" and serve["target"]["mig_profile"] == "1g.10gb"
    assert serve["monthly_cost_after"] == pytest.approx(round(2.50 / 7 * 1.2 * MONTH_H, 2), abs=0.005)  # 312.86
    assert serve["monthly_savings"] == pytest.approx(round(2.50 * MONTH_H - 2.50 / 7 * 1.2 * MONTH_H, 2),
                                                     abs=0.01)  # 1512.14


SPAN = f"""
tick: 15s
duration: 2h
prices: {{"{H100}": 4.0}}
nodes:
  - {{name: h100, model: "{H100}", gpus: 4}}
pods:
  - {{name: web-0, namespace: shop, node: h100, owner: {{kind: Deployment, name: web}}, utilization: 0.0,
     framebuffer: 2GiB}}
  - {{name: web-1, namespace: shop, node: h100, owner: {{kind: Deployment, name: web}}, utilization: 0.03,
     framebuffer: 5GiB}}
  - {{name: early-0, namespace: lab, node: h100, owner: {{kind: Job, name: early}}, end: 1h, utilization: 0.0}}
  - {{name: late-0, namespace: lab, node: h100, owner: {{kind: Job, name: late}}, start: 1h, utilization: 0.0}}
"""
H = 3600.0
TICK_OF_HOUR = 15.0 / 3600.0  # early's end and late's start may each be off by one tick


@pytest.fixture(scope="module")
def span() -> tuple[Path, float]:
    """The SPAN ledger and its first hour (scenario time 0 is on an hour boundary)."""
    path = _simulate(SPAN, "span.yaml")
    conn = sqlite3.connect(path)
    try:
        (first,) = conn.execute("SELECT MIN(hour) FROM usage").fetchone()
    finally:
        conn.close()
    return path, float(first)


def _at(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_replicas_of_one_deployment_are_one_pooled_row(span: tuple[Path, float]) -> None:
    """web-0 and web-1 (owner Deployment web) are one row, neither pod alone: cost pooled, 2 pods x 4.00 x 2 h
    over the 2 h window x 730 = 5840.00 a month; utilisation pooled, half the seconds in the <1 % bucket and
    half in [2 %, 5 %) (web-1's 3 %): p50 0.01, p95 0.05 (web-0 alone: p95 0.01); the framebuffer peak is the
    larger pod's, 5 GiB; hours observed 2.0, the most any one device was measured per hour (side by side,
    not 2 pods x 2 h = 4.0); each pod holds 1 GPU, so the placement is 1 GPU."""
    ledger, _first = span
    conn = sqlite3.connect(ledger)
    try:
        pods = conn.execute("SELECT DISTINCT pod FROM evidence WHERE workload = 'web' ORDER BY pod").fetchall()
    finally:
        conn.close()
    assert pods == [("web-0",), ("web-1",)]
    rows = _recommend(ledger, "7d")
    assert set(rows) == {"web", "early", "late"}
    web = rows["web"]
    assert (web["namespace"], web["action"]) == ("shop", "scale_to_zero")
    assert web["current"] == {"gpu_model": H100, "mig_profile": None, "gpus": 1, "replicas": None}
    assert web["monthly_cost_now"] == pytest.approx(2 * 4.00 * 2 / 2 * MONTH_H)  # 5840.00
    assert web["monthly_savings"] == pytest.approx(5840.00)
    assert (web["evidence"]["util_p50"], web["evidence"]["util_p95"]) == (pytest.approx(0.01), pytest.approx(0.05))
    assert web["evidence"]["framebuffer_peak_bytes"] == 5 * GIB
    assert web["evidence"]["hours_observed"] == pytest.approx(2.0)
    # the whole 2 h window: early and late each booked 1 h: 4.00 x 1 h / 2 h x 730 = 1460.00
    for wl in ("early", "late"):
        assert rows[wl]["monthly_cost_now"] == pytest.approx(4.00 * 1 / 2 * MONTH_H, rel=TICK_OF_HOUR)


def test_since_drops_the_first_hour_and_the_pace_follows(span: tuple[Path, float]) -> None:
    """`--since` 1h20m into the run starts the window at the start of its hour, 1h: late ran all of that hour,
    4.00 x 1 h / 1 h x 730 = 2920.00 a month (over the whole run it was 1460.00; a window starting at 1h20m
    would claim the hour's 4.00 over 40 min, 4380.00); early booked nothing after 1h: no row; web's pace is
    unchanged, 2 x 4.00 x 730 = 5840.00, on 1 h observed."""
    ledger, first = span
    rows = _recommend(ledger, "7d", "--since", _at(first + H + 20 * 60))
    assert set(rows) == {"web", "late"}
    assert rows["late"]["monthly_cost_now"] == pytest.approx(4.00 * MONTH_H, rel=TICK_OF_HOUR)  # 2920.00
    assert rows["web"]["monthly_cost_now"] == pytest.approx(2 * 4.00 * MONTH_H)  # 5840.00
    assert rows["web"]["evidence"]["hours_observed"] == pytest.approx(1.0)


def test_until_ends_the_window_at_its_hour_capped_at_the_latest_booked_time(span: tuple[Path, float]) -> None:
    """`--until` 40 min into the run ends the window at the end of that hour (its bucket is counted whole):
    early alone is 4.00 x 1 h / 1 h x 730 = 2920.00, late (from 1h) has no row. An `--until` 10 h after the
    start is capped at the latest booked time (2 h): the same as none (uncapped, late's 4.00 over 10 h would be
    292.00 a month)."""
    ledger, first = span
    rows = _recommend(ledger, "7d", "--until", _at(first + 40 * 60))
    assert set(rows) == {"web", "early"}
    assert rows["early"]["monthly_cost_now"] == pytest.approx(4.00 * MONTH_H, rel=TICK_OF_HOUR)  # 2920.00
    assert rows["web"]["evidence"]["hours_observed"] == pytest.approx(1.0)
    late = _recommend(ledger, "7d", "--until", _at(first + 10 * H))
    assert late == _recommend(ledger, "7d")
    assert late["late"]["monthly_cost_now"] == pytest.approx(4.00 * 1 / 2 * MONTH_H, rel=TICK_OF_HOUR)  # 1460.00


def test_since_and_until_reject_bad_times_in_one_line(span: tuple[Path, float]) -> None:
    """A time that is neither RFC3339 nor a duration, or an --until before --since: one line, exit 2."""
    ledger, first = span
    for flags, said in ((["--since", "soon"], "--since: bad time 'soon'"),
                        (["--until", "2026-13-01T00:00:00Z"], "--until: bad time"),
                        (["--since", _at(first + H), "--until", _at(first)], "--until is before --since")):
        proc = _run(ledger, "7d", *flags)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and said in proc.stderr, proc.stderr
