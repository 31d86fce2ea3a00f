"""Golden scenarios: `simulate` through the real agents, aggregator and protocols, then the report,
against answers computed by hand (the arithmetic is in each test). Each figure may differ from the
exact integral by at most one tick per pod start or end (SCENARIO.md)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.pipeline import run_simulation
from exporter.sim.scenario import parse_scenario

NANO = Decimal("1e-9")  # the ledger's last digit, exactly (a float 1e-9 is not)
TICK = 15.0


async def simulate(text: str, tmp_path: Path, by: str = "namespace") -> dict[str, dict[str, Any]]:
    import sqlite3

    ledger = tmp_path / "ledger.db"
    with tempfile.TemporaryDirectory(prefix="gce-") as work:
        await run_simulation(parse_scenario(text, "golden.yaml"), ledger, workdir=Path(work))
    conn = sqlite3.connect(ledger)
    rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), by, since=None, until=None)
    conn.close()
    key = {"namespace": "namespace", "pod": "pod", "model": "gpu_model", "node": "node", "pool": "pool"}[by]
    return {r[key]: r for r in rows}


def close(got: float, exact: float, ticks: float = 0.0, fraction: float = 1.0, price: float = 1.0) -> None:
    """|got - exact| <= ticks x 15 s x fraction (in hours, times price), plus float noise."""
    tol = ticks * TICK * fraction / 3600.0 * price + 1e-6
    assert abs(float(got) - exact) <= tol, f"{got} vs exact {exact} (tolerance {tol})"


WHOLE = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 2, labels: {gpu.platform/pool: train}}]
pods:
  - {name: a, namespace: team-a, node: h100, gpus: 1, utilization: [{at: 0m, value: 0.8}, {at: 30m, value: 0.2}]}
  - {name: b, namespace: team-b, node: h100, gpus: 1, start: 30m, utilization: 0.5}
"""


@pytest.mark.timeout(120)  # 37 s measured on a loaded 2-core machine (load 13)
async def test_whole_gpus_with_step_utilisation(tmp_path: Path) -> None:
    """a: 1 GPU x 1 h = 1 GPU-h, used 0.5 h x 0.8 + 0.5 h x 0.2 = 0.5, cost 1 x 4 = 4, idle cost 2.
    b: 1 GPU x 0.5 h = 0.5 GPU-h, used 0.25, cost 2. Unallocated: 2 GPU-h - 1.5 = 0.5 -> 2.00."""
    r = await simulate(WHOLE, tmp_path)
    a, b, un = r["team-a"], r["team-b"], r["__unallocated__"]
    close(a["allocated_gpu_hours"], 1.0)
    close(a["used_gpu_hours"], 0.5, ticks=1, fraction=0.6)  # the step at 30m: one tick at the new value
    close(a["cost"], 4.0)
    close(a["idle_cost"], 2.0, ticks=1, fraction=0.6, price=4.0)
    assert a["unmeasured_gpu_hours"] == 0 and a["currency"] == "USD"
    close(b["allocated_gpu_hours"], 0.5, ticks=1)
    close(b["used_gpu_hours"], 0.25, ticks=1, fraction=0.5)
    close(b["cost"], 2.0, ticks=1, price=4.0)
    close(un["idle_gpu_hours"], 0.5, ticks=1)
    close(un["cost"], 2.0, ticks=1, price=4.0)
    assert un["allocated_gpu_hours"] == 0 and un["used_gpu_hours"] == 0


@pytest.mark.timeout(180)  # 56 s measured on a loaded 2-core machine (load 13)
async def test_restarts_lose_and_repeat_nothing(tmp_path: Path) -> None:
    """The same cluster with an agent restart at 20m and an aggregator restart at 40m books the same
    figures as without (the agent resumes its state file; the aggregator its ledger and marks)."""
    plain = await simulate(WHOLE, tmp_path / "plain")
    restarted = await simulate(WHOLE + """
events:
  - {type: agent_restart, node: h100, at: 20m}
  - {type: aggregator_restart, at: 40m}
""", tmp_path / "restarted")
    for ns in ("team-a", "team-b", "__unallocated__"):
        for f in ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cost"):
            assert restarted[ns][f] == pytest.approx(plain[ns][f], abs=NANO), (ns, f)


@pytest.mark.timeout(120)  # 39 s measured on a loaded 2-core machine (load 13)
async def test_agent_state_loss_is_a_reset_not_a_double_count(tmp_path: Path) -> None:
    """The agent's state file is deleted at 20m: new epoch, counters from zero. The aggregator books
    the reset as new time: nothing double-counted, at most the restart tick lost (1 tick per pod)."""
    r = await simulate(WHOLE + "events: [{type: agent_state_loss, node: h100, at: 20m}]\n", tmp_path)
    a = r["team-a"]
    assert a["allocated_gpu_hours"] <= 1.0 + 1e-9
    close(a["allocated_gpu_hours"], 1.0, ticks=1)


MIG = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.5}
nodes: [{name: a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2, mig: {0: [3g.40gb, 1g.10gb]}}]
pods:
  - {name: big, namespace: inf, node: a100, gpus: 1, resource: nvidia.com/mig-3g.40gb, utilization: 0.6}
  - {name: small, namespace: emb, node: a100, gpus: 1, resource: nvidia.com/mig-1g.10gb, utilization: 0.3}
"""


async def test_mig_fractions_and_uncarved_capacity(tmp_path: Path) -> None:
    """big: 3/7 GPU x 1 h = 0.428571 GPU-h, used x 0.6 = 0.257143, cost x 2.5 = 1.071429.
    small: 1/7 = 0.142857, used 0.042857, cost 0.357143.
    Unallocated: GPU 0 has 3 uncarved slices (3/7), GPU 1 is whole and free (1): 10/7 = 1.428571 GPU-h,
    cost 3.571429."""
    r = await simulate(MIG, tmp_path)
    close(r["inf"]["allocated_gpu_hours"], 3 / 7)
    close(r["inf"]["used_gpu_hours"], 3 / 7 * 0.6)
    close(r["inf"]["cost"], 3 / 7 * 2.5)
    close(r["emb"]["allocated_gpu_hours"], 1 / 7)
    close(r["emb"]["used_gpu_hours"], 1 / 7 * 0.3)
    close(r["emb"]["idle_cost"], 1 / 7 * 0.7 * 2.5)
    close(r["__unallocated__"]["idle_gpu_hours"], 10 / 7)
    close(r["__unallocated__"]["cost"], 10 / 7 * 2.5)


SHARED = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8}
nodes: [{name: l4, model: "NVIDIA L4", gpus: 1, time_slicing: 4}]
pods:
  - {name: x, namespace: dev-x, node: l4, gpus: 1, utilization: 0.2}
  - {name: y, namespace: dev-y, node: l4, gpus: 2, utilization: 0.3}
"""


async def test_time_slicing_splits_busy_time(tmp_path: Path) -> None:
    """4 replicas: x holds 1/4, y holds 2/4. DCGM reads 0.2 + 0.3 = 0.5, so busy = 0.5 GPU-h, split by
    fraction (0.25 : 0.5): x used 1/6 GPU-h (allocated 0.25), y 1/3 (allocated 0.5).
    Cost x 0.25 x 0.8 = 0.2, y 0.4. Unallocated 1 - 0.75 = 0.25 GPU-h, 0.2."""
    r = await simulate(SHARED, tmp_path)
    close(r["dev-x"]["allocated_gpu_hours"], 0.25)
    close(r["dev-x"]["used_gpu_hours"], 1 / 6)
    close(r["dev-y"]["allocated_gpu_hours"], 0.5)
    close(r["dev-y"]["used_gpu_hours"], 1 / 3)
    close(r["dev-x"]["cost"], 0.2)
    close(r["dev-y"]["cost"], 0.4)
    close(r["dev-y"]["idle_gpu_hours"], 0.5 - 1 / 3)
    close(r["__unallocated__"]["idle_gpu_hours"], 0.25)


@pytest.mark.timeout(120)  # 39 s measured on a loaded 2-core machine (load 13)
async def test_dcgm_down_is_unmeasured_not_idle(tmp_path: Path) -> None:
    """1 GPU at 0.5 for 1 h, DCGM down 20m-30m: allocated 1, unmeasured 1/6, used 0.5 x 5/6 = 5/12,
    idle 1 - 5/12 - 1/6 = 5/12."""
    r = await simulate("""
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 1}]
pods: [{name: p, namespace: ns, node: h100, gpus: 1, utilization: 0.5}]
events: [{type: dcgm_down, node: h100, from: 20m, to: 30m}]
""", tmp_path)
    ns = r["ns"]
    close(ns["allocated_gpu_hours"], 1.0)
    close(ns["unmeasured_gpu_hours"], 1 / 6)
    close(ns["used_gpu_hours"], 5 / 12)
    close(ns["idle_gpu_hours"], 5 / 12)


MYSTERY = """
tick: 15s
duration: 1h
prices: {}
default_price: 1.5
nodes: [{name: x, model: "NVIDIA Mystery X", gpus: 1}]
pods: [{name: p, namespace: ns, node: x, gpus: 1, end: 1207s, utilization: 1.0}]
"""


@pytest.mark.timeout(120)  # 44 s measured on a loaded 2-core machine (load 13)
async def test_pod_deleted_mid_tick_and_unknown_model(tmp_path: Path) -> None:
    """A pod ending at 20m7s (mid-tick) is charged within one tick of 20m7s; an unlisted model is priced
    at default_price 1.5: 1 GPU x (1207/3600) h x 1.5 = 0.502917 (within one tick)."""
    r = await simulate(MYSTERY, tmp_path)
    close(r["ns"]["allocated_gpu_hours"], 1207 / 3600, ticks=1)
    close(r["ns"]["cost"], 1207 / 3600 * 1.5, ticks=1, price=1.5)
    by_model = await simulate(MYSTERY, tmp_path / "again", by="model")
    assert set(by_model) == {"NVIDIA Mystery X"}
    close(by_model["NVIDIA Mystery X"]["unallocated_gpu_hours"], 1 - 1207 / 3600, ticks=1)


@pytest.mark.timeout(420)  # 156 s measured on a loaded 2-core machine (load 13)
def test_cli_simulate_then_report_json(tmp_path: Path) -> None:
    """The documented commands: `simulate` then `report --by namespace --format json` (and csv, pool)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(WHOLE)
    ledger = tmp_path / "l.db"
    cmd = [sys.executable, "-m", "exporter"]
    subprocess.run([*cmd, "simulate", "--scenario", str(scenario), "--ledger", str(ledger)], check=True,
                   capture_output=True)
    out = subprocess.run([*cmd, "report", "--ledger", str(ledger), "--by", "namespace", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    rows = {r["namespace"]: r for r in json.loads(out)}
    for field in ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours", "cost",
                  "idle_cost", "currency"):
        assert field in rows["team-a"]
    close(rows["team-a"]["cost"], 4.0)
    csv_out = subprocess.run([*cmd, "report", "--ledger", str(ledger), "--by", "pool", "--format", "csv"],
                             check=True, capture_output=True, text=True).stdout
    assert csv_out.splitlines()[0].startswith("pool,") and "train" in csv_out
    bad = subprocess.run([*cmd, "report", "--ledger", str(ledger), "--by", "colour"], capture_output=True,
                         text=True, check=False)
    assert bad.returncode == 2 and "--by" in bad.stderr
    bad = subprocess.run([*cmd, "report", "--ledger", str(ledger), "--since", "yesterday-ish"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "bad time" in bad.stderr
    future = subprocess.run([*cmd, "report", "--ledger", str(ledger), "--since", "2999-01-01T00:00:00Z",
                             "--format", "json"], capture_output=True, text=True, check=True)
    assert json.loads(future.stdout) == []


async def _run_keeping_relists(text: str, workdir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Like ``simulate --by pod``, but also returns how often the aggregator's watch relisted each kind."""
    import sqlite3

    from exporter.clock import VirtualClock
    from exporter.pipeline import Pipeline

    scenario = parse_scenario(text, "relist.yaml")
    pipe = Pipeline(scenario, workdir, clock=VirtualClock(1_800_000_000.0), ledger=workdir / "ledger.db")
    await pipe.start(serve_aggregator=False)
    try:
        for k in range(int(scenario.duration // scenario.tick) + 1):
            await pipe.step(k * scenario.tick)
        assert pipe.aggregator is not None and pipe.aggregator.watcher is not None
        relists = dict(pipe.aggregator.watcher.relists)
    finally:
        await pipe.close()
    conn = sqlite3.connect(workdir / "ledger.db")
    rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), "pod", since=None, until=None)
    conn.close()
    return {r["pod"]: r for r in rows}, relists


@pytest.mark.timeout(120)  # 29 s measured on a loaded 2-core machine (load 13)
async def test_forced_410_mid_run_loses_no_pod(tmp_path: Path) -> None:
    """The API server compacts its history at 10m and 31m: the pods watch resuming gets 410 Gone and must
    relist (asserted: a relist of *pods* happened); pod b starts at 30m inside that window. Per pod, the
    allocated GPU-hours, workload and cost equal the run without compaction: a 1 h, b 0.5 h."""
    plain, plain_relists = await _run_keeping_relists(WHOLE, tmp_path / "plain")
    expired, relists = await _run_keeping_relists(WHOLE + """
events:
  - {type: watch_expire, at: 10m}
  - {type: watch_expire, at: 31m}
""", tmp_path / "expired")
    assert plain_relists["pods"] == 0 and relists["pods"] >= 1
    assert set(plain) == set(expired) == {"a", "b", "__unallocated__"}
    close(expired["a"]["allocated_gpu_hours"], 1.0, ticks=1 / 15)
    close(expired["b"]["allocated_gpu_hours"], 0.5, ticks=1 / 15)  # held from its startTime: within 1 s
    for pod in plain:
        assert expired[pod]["allocated_gpu_hours"] == pytest.approx(plain[pod]["allocated_gpu_hours"], abs=NANO)
        assert expired[pod]["cost"] == pytest.approx(plain[pod]["cost"], abs=NANO)
        assert expired[pod].get("workload") == plain[pod].get("workload")


async def test_pod_deletion_closes_books_through_the_watch(tmp_path: Path) -> None:
    """When a GPU pod is deleted the aggregator drops it from the held gauges at once (the watch event),
    and pulls its node's agent without waiting for the next tick."""
    from exporter.clock import VirtualClock
    from exporter.pipeline import Pipeline

    scenario = parse_scenario(WHOLE.replace("start: 30m, utilization: 0.5}", "start: 0m, end: 90s, utilization: 0.5}"),
                              "del.yaml")
    clock = VirtualClock(1_800_000_000.0)
    pipe = Pipeline(scenario, tmp_path / "w", clock=clock)
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(6):  # 0..75 s: both pods hold a GPU
            await pipe.step(k * 15)
        assert agg.gauges.allocated_gpus == {"team-a": 1.0, "team-b": 1.0}
        pulls = agg.pulls
        await pipe.peers.advance(90.0)  # b ends: DELETED arrives on the watch
        await pipe.wait_watch_caught_up()
        for _ in range(100):
            if agg.pulls > pulls:
                break
            await asyncio.sleep(0.01)
        assert agg.gauges.allocated_gpus.get("team-b", 0.0) == 0.0
        assert ("team-b", "b") not in agg.gauges.pods
        assert agg.pulls == pulls + 1  # the deletion pulled the pod's node's agent at once
    finally:
        await pipe.close()


async def test_counters_restored_from_ledger_never_go_backwards(tmp_path: Path) -> None:
    """After an aggregator restart its counters (from the ledger's running totals) equal what they were."""
    from exporter.clock import VirtualClock
    from exporter.model.books import NamespaceKey
    from exporter.pipeline import Pipeline
    from exporter.sim.cluster import Happening

    clock = VirtualClock(1_800_000_000.0)
    pipe = Pipeline(parse_scenario(WHOLE, "restore.yaml"), tmp_path / "w", clock=clock)
    await pipe.start(serve_aggregator=False)
    try:
        for k in range(10):
            await pipe.step(k * 15)
        assert pipe.aggregator is not None and pipe.aggregator.books is not None
        before = dict(pipe.aggregator.books.totals)
        await pipe.restart(Happening("aggregator_restart", None, 150.0))
        assert pipe.aggregator is not None and pipe.aggregator.books is not None
        after = pipe.aggregator.books.totals
        assert before.keys() == after.keys()
        assert before[NamespaceKey("team-a", "USD")].allocated_s == pytest.approx(135.0)
        for key, values in before.items():
            assert after[key].values() == pytest.approx(values.values())
    finally:
        await pipe.close()


@pytest.mark.timeout(420)  # 169 s measured on a loaded 2-core machine (load 13)
async def test_default_scenario_golden_numbers(tmp_path: Path) -> None:
    """The built-in scenario (2 h, 15 s ticks; every pod boundary falls on a tick), by hand:
    * ai-training: train-llm 4 GPUs x 2 h = 8, finetune 2 x 1 h (15m-75m) = 2, notebook 1 x 2 h = 2 -> 12 GPU-h,
      at 4.00 -> 48.00.
    * ai-inference: 2 x 3g.40gb (3/7) x 2 h = 12/7, 3 x 1g.10gb (1/7) x 2 h = 6/7, batch-infer 1 x 1 h
      -> 12/7 + 6/7 + 1 = 25/7 = 3.5714 GPU-h.
    * ai-dev (time-sliced L4, 4 replicas): bob + carol 1/4 each x 2 h = 1, dan 2/4 x 80 min = 2/3
      -> 5/3 = 1.6667 GPU-h; DCGM down 10 min while all 4 replicas are held -> (1/4 + 1/4 + 2/4) x 1/6 h
      = 1/6 = 0.1667 GPU-h unmeasured.
    * unallocated: H100 16 - 12 = 4, A100 8 - 25/7 = 31/7, L4 8 - 5/3 = 19/3 -> 4 + 31/7 + 19/3 = 310/21
      = 14.7619 GPU-h; cost 4 x 4.00 + 31/7 x 2.50 + 19/3 x 0.80 x 0.5 (dev pool) = 16 + 11.0714 + 2.5333
      = 29.6048.
    * ai-research (added with version-2 pricing; fully held, so the figures above stay): sweep holds 8 spot
      H100s on p5.48xlarge for 2 h = 16 GPU-h, list 16 x 55.04 / 8 = 110.08, cost x 0.35 = 38.528;
      pretrain holds 8 H200s (6 committed at 3.00, list 5.00: 0.75 x 3.00 + 0.25 x 5.00 = 3.50) for 2 h
      = 16 GPU-h, list 80.00, cost 56.00 -> 32 GPU-h, list 190.08, cost 94.528; nothing unused.
      Every other namespace pays list: ai-training list_cost = cost = 48.00.
    * ai-shared (added with DRA and HAMi; fully held, so the figures above stay): rag-0's ResourceClaim holds
      the DRA node's one A100 (gpu-0) for 2 h = 2 GPU-h, used 2 x 0.6 = 1.2; asr-0 and tts-0 share the HAMi
      node's A100 with 50 % cores each (memory 20480 MiB is under half the framebuffer, so max(mem, cores)
      = 0.5 each) for 2 h = 1 + 1 GPU-h; the GPU is busy 0.3 + 0.2 = 0.5 -> 1 GPU-h split 1:1 = 0.5 used each
      -> 4 GPU-h, used 2.2, cost = list = 4 x 2.50 = 10.00; unallocated on both nodes 0.
    """
    import sqlite3

    from exporter.cli import DEFAULT_SCENARIO

    ledger = tmp_path / "ledger.db"
    await run_simulation(parse_scenario(DEFAULT_SCENARIO.read_text(), str(DEFAULT_SCENARIO)), ledger,
                         workdir=tmp_path / "w")

    conn = sqlite3.connect(ledger)
    rows = {r["namespace"]: r for r in build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))),
                                                     "namespace", since=None, until=None)}
    conn.close()
    pinned = 5e-5  # the figures are quoted to four decimals
    assert abs(float(rows["ai-training"]["allocated_gpu_hours"]) - 12.0) < pinned
    assert abs(float(rows["ai-training"]["cost"]) - 48.0) < pinned
    assert abs(float(rows["ai-inference"]["allocated_gpu_hours"]) - 25 / 7) < pinned
    assert round(25 / 7, 4) == 3.5714
    assert abs(float(rows["ai-dev"]["allocated_gpu_hours"]) - 5 / 3) < pinned
    assert abs(float(rows["ai-dev"]["unmeasured_gpu_hours"]) - 1 / 6) < pinned
    unallocated = rows["__unallocated__"]
    assert abs(float(unallocated["idle_gpu_hours"]) - 310 / 21) < pinned
    assert round(310 / 21, 4) == 14.7619
    assert abs(float(unallocated["cost"]) - (16 + 31 / 7 * 2.5 + 19 / 3 * 0.8 * 0.5)) < pinned
    assert round(16 + 31 / 7 * 2.5 + 19 / 3 * 0.8 * 0.5, 4) == 29.6048
    assert "__unobserved__" not in rows  # every agent was up the whole run
    research = rows["ai-research"]
    assert abs(float(research["allocated_gpu_hours"]) - 32.0) < pinned
    assert abs(float(research["list_cost"]) - (16 * 55.04 / 8 + 16 * 5.00)) < pinned
    assert abs(float(research["cost"]) - (16 * 55.04 / 8 * 0.35 + 16 * (0.75 * 3.00 + 0.25 * 5.00))) < pinned
    assert round(16 * 55.04 / 8 * 0.35 + 16 * 3.50, 4) == 94.528
    assert abs(float(rows["ai-training"]["list_cost"]) - 48.0) < pinned
    assert "__unused_commitment__" not in rows
    shared = rows["ai-shared"]
    assert abs(float(shared["allocated_gpu_hours"]) - (2 + 0.5 * 2 + 0.5 * 2)) < pinned
    assert abs(float(shared["used_gpu_hours"]) - (2 * 0.6 + (0.3 + 0.2) * 2)) < pinned
    assert abs(float(shared["cost"]) - 4 * 2.50) < pinned and abs(float(shared["list_cost"]) - 10.0) < pinned
