"""``report --by queue``: GPU-hours and money per scheduler queue, end to end on the simulator (agents, aggregator,
the simulated API serving Kueue v1beta2, Volcano and KAI objects), each queue's figures computed by hand.

Every pod starts and ends on a 15 s tick, so the figures are exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario
from tests.integration.test_golden import close

SCENARIO = """
tick: 15s
duration: 90m
prices: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA A100-SXM4-80GB": 2.50}
nodes:
  - {name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 4}
  - {name: n-a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2}
  - {name: n-mix, model: "NVIDIA H100 80GB HBM3", gpus: 1}
namespaces:
  - {name: team-a}
  - {name: team-b}
  - {name: team-c}
  - {name: team-d}
queues:
  - {kind: kueue, name: gpu, gpus: 8, local_queues: [{namespace: team-a, name: train}]}
  - {kind: volcano, name: research, gpus: 4, namespaces: [team-b]}
  - {kind: kai, name: team-c, gpus: 2}
pods:
  - {name: train-0, namespace: team-a, node: n-h100, gpus: 2, queue: train, owner: {kind: Job, name: train},
     utilization: 0.5}
  - {name: train-1, namespace: team-a, node: n-h100, gpus: 2, queue: train, owner: {kind: Job, name: train},
     utilization: 0.5}
  - {name: r0, namespace: team-b, node: n-a100, gpus: 1, queue: research, end: 60m}
  - {name: plain, namespace: team-b, node: n-a100, gpus: 1}
  - {name: k0, namespace: team-c, node: n-mix, gpus: 1, queue: team-c, end: 30m}
  - {name: y0, namespace: team-d, node: n-mix, gpus: 1, start: 30m, labels: {yunikorn.apache.org/queue: root.team.d}}
"""
H100, A100 = 4.00, 2.50
START = 1_800_000_000.0


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("queues-golden")
    (work / "s.yaml").write_text(SCENARIO)
    subprocess.run([sys.executable, "-m", "exporter", "simulate", "--scenario", str(work / "s.yaml"),
                    "--ledger", str(work / "l.db")], check=True, capture_output=True, timeout=600)
    return work / "l.db"


def report(ledger: Path, by: str) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "exporter", "report", "--ledger", str(ledger), "--by", by,
                           "--format", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_report_by_queue(ledger: Path) -> None:
    """kueue team-a/train (ClusterQueue gpu): train-0 and train-1, 2 H100 each for 90 min = 2 x 2 x 1.5 = 6 GPU-h,
    6 x 4.00 = 24.00.
    volcano research: r0, 1 A100 for 60 min = 1 GPU-h, 1 x 2.50 = 2.50.
    kai team-c: k0, 1 H100 for 30 min = 0.5 GPU-h, 0.5 x 4.00 = 2.00.
    yunikorn root.team.d (its label): y0, 1 H100 from 30 to 90 min = 1 GPU-h, 4.00.
    no queue: plain, 1 A100 for 90 min = 1.5 GPU-h, 1.5 x 2.50 = 3.75.
    __unallocated__: n-a100's second GPU after r0 ends, 30 min = 0.5 GPU-h, 0.5 x 2.50 = 1.25."""
    rows = {(r["scheduler"], r["queue"], r["cluster_queue"]): r for r in report(ledger, "queue")}
    expected = {("kueue", "team-a/train", "gpu"): (2 * 2 * 1.5, 2 * 2 * 1.5 * H100),
                ("volcano", "research", ""): (1.0, 1.0 * A100),
                ("kai", "team-c", ""): (0.5, 0.5 * H100),
                ("yunikorn", "root.team.d", ""): (1.0, 1.0 * H100),
                ("", "", ""): (1.5, 1.5 * A100)}
    unallocated = ("__unallocated__",) * 3
    assert set(rows) == {*expected, unallocated}
    for key, (hours, cost) in expected.items():
        close(rows[key]["allocated_gpu_hours"], hours)
        close(rows[key]["cost"], cost)
    close(rows[("kueue", "team-a/train", "gpu")]["cost"], 24.00)
    close(rows[unallocated]["idle_gpu_hours"], 0.5)
    close(rows[unallocated]["cost"], 0.5 * A100)


def test_report_by_cluster_queue(ledger: Path) -> None:
    """``--by cluster_queue``: Kueue's ClusterQueue gpu carries train's 6 GPU-h (24.00); other schedulers' rows have
    no ClusterQueue: volcano 2.50, kai 2.00, yunikorn 4.00."""
    rows = {(r["scheduler"], r["cluster_queue"]): r for r in report(ledger, "cluster_queue")}
    close(rows[("kueue", "gpu")]["allocated_gpu_hours"], 6.0)
    close(rows[("kueue", "gpu")]["cost"], 24.00)
    close(rows[("volcano", "")]["cost"], 1.0 * A100)
    close(rows[("kai", "")]["cost"], 0.5 * H100)
    close(rows[("yunikorn", "")]["cost"], 1.0 * H100)


async def test_report_api_by_queue(tmp_path: Path) -> None:
    """``/api/v1/report?by=queue`` after 3 simulated minutes (12 intervals of 15 s = 0.05 h): team-a/train
    2 pods x 2 GPUs x 0.05 h = 0.2 GPU-h, 0.2 x 4.00 = 0.80; research 0.05 GPU-h, 0.05 x 2.50 = 0.125."""
    pipe = Pipeline(parse_scenario(SCENARIO, "queues.yaml"), tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(13):
            await pipe.step(k * 15)
        async with aiohttp.ClientSession() as session, session.get(
                f"http://{agg.settings.listen}/api/v1/report", params={"by": "queue"}) as resp:
            assert resp.status == 200
            api = {r["queue"]: r for r in await resp.json()}
    finally:
        await pipe.close()
    hours = 12 * 15 / 3600
    close(api["team-a/train"]["allocated_gpu_hours"], 2 * 2 * hours)
    close(api["team-a/train"]["cost"], 2 * 2 * hours * H100)
    assert api["team-a/train"]["cluster_queue"] == "gpu"
    close(api["research"]["cost"], hours * A100)
