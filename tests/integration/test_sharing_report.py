"""``report --by sharing``: one node per way a GPU is shared, through ``simulate`` and the report command, each
mode's GPU-hours and cost computed by hand. Capacity nobody held is its own row (``__unallocated__``)."""

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

#: 1 h at 15 s ticks; every pod runs the whole hour, so the figures are exact.
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA L4": 0.80, "NVIDIA A100-SXM4-80GB": 2.00}
nodes:
  - {name: n-whole, model: "NVIDIA H100 80GB HBM3", gpus: 1}
  - {name: n-ts, model: "NVIDIA L4", gpus: 1, time_slicing: 2}
  - {name: n-mps, model: "NVIDIA L4", gpus: 1, mps: 4}
  - {name: n-hami, model: "NVIDIA A100-SXM4-80GB", gpus: 1, hami: true}
  - {name: n-dra, model: "NVIDIA H100 80GB HBM3", gpus: 1, dra: true}
pods:
  - {name: w1, namespace: a, node: n-whole, gpus: 1, utilization: 0.5}
  - {name: t1, namespace: a, node: n-ts, gpus: 1, utilization: 0.2}
  - {name: t2, namespace: b, node: n-ts, gpus: 1, utilization: 0.2}
  - {name: m1, namespace: b, node: n-mps, gpus: 1, utilization: 0.1}
  - {name: h1, namespace: a, node: n-hami, hami: {memory_mib: 40960}, utilization: 0.2}
  - {name: d1, namespace: b, node: n-dra, claims: [{device_class: gpu.nvidia.com, count: 1}], utilization: 0.5}
"""
H100, L4, A100 = 4.00, 0.80, 2.00
START = 1_800_000_000.0


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sharing-report")
    (work / "s.yaml").write_text(SCENARIO)
    subprocess.run([sys.executable, "-m", "exporter", "simulate", "--scenario", str(work / "s.yaml"),
                    "--ledger", str(work / "l.db")], check=True, capture_output=True, timeout=300)
    return work / "l.db"


def report(ledger: Path, by: str) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "exporter", "report", "--ledger", str(ledger), "--by", by,
                           "--format", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_report_by_sharing(ledger: Path) -> None:
    """none: w1 holds n-whole's H100 = 1 GPU-h, cost 1 x 4.00 = 4.00.
    time-slicing: t1, t2 hold 1 of 2 replicas of n-ts's L4 each = 1/2 + 1/2 = 1 GPU-h, cost 1 x 0.80 = 0.80.
    mps: m1 holds 1 of 4 replicas of n-mps's L4 = 1/4 GPU-h, cost 1/4 x 0.80 = 0.20.
    hami: h1 holds 40960 MiB of the A100's 81920 MiB, cores unset = 40960 / 81920 = 1/2 GPU-h, cost 1/2 x 2.00 = 1.00.
    dra: d1's own claim on n-dra's H100, whole = 1 GPU-h, cost 4.00.
    __unallocated__: n-mps 1 - 1/4 = 3/4 L4-h (0.60) + n-hami 1 - 1/2 = 1/2 A100-h (1.00) = 1.25 GPU-h, cost 1.60."""
    rows = {r["sharing"]: r for r in report(ledger, "sharing")}
    expected = {"none": (1.0, 1.0 * H100), "time-slicing": (0.5 + 0.5, 1.0 * L4), "mps": (0.25, 0.25 * L4),
                "hami": (40960 / 81920, 0.5 * A100), "dra": (1.0, 1.0 * H100)}
    assert set(rows) == {*expected, "__unallocated__"}
    for mode, (hours, cost) in expected.items():
        close(rows[mode]["allocated_gpu_hours"], hours)
        close(rows[mode]["cost"], cost)
    close(rows["__unallocated__"]["idle_gpu_hours"], 0.75 + 0.5)
    close(rows["__unallocated__"]["cost"], 0.75 * L4 + 0.5 * A100)


def test_report_by_sharing_and_namespace(ledger: Path) -> None:
    """``--by sharing,namespace``: time-slicing splits into a (t1, 1/2 GPU-h, 0.40) and b (t2, 1/2 GPU-h, 0.40);
    the other modes have one namespace each (none, hami: a; mps, dra: b)."""
    rows = {(r["sharing"], r["namespace"]): r for r in report(ledger, "sharing,namespace")}
    for key, hours in {("time-slicing", "a"): 0.5, ("time-slicing", "b"): 0.5, ("none", "a"): 1.0,
                       ("hami", "a"): 0.5, ("mps", "b"): 0.25, ("dra", "b"): 1.0}.items():
        close(rows[key]["allocated_gpu_hours"], hours)
    close(rows[("time-slicing", "a")]["cost"], 0.5 * L4)
    assert ("__unallocated__", "__unallocated__") in rows


async def test_report_api_by_sharing(tmp_path: Path) -> None:
    """``/api/v1/report?by=sharing`` after 3 simulated minutes (12 intervals of 15 s = 0.05 h per holder):
    none 0.05 GPU-h; time-slicing 2 x 1/2 x 0.05 = 0.05; mps 1/4 x 0.05 = 0.0125; hami 1/2 x 0.05 = 0.025;
    dra 0.05 x 4.00 = 0.20."""
    pipe = Pipeline(parse_scenario(SCENARIO, "sharing.yaml"), tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(13):
            await pipe.step(k * 15)
        async with aiohttp.ClientSession() as session, session.get(
                f"http://{agg.settings.listen}/api/v1/report", params={"by": "sharing"}) as resp:
            assert resp.status == 200
            api = {r["sharing"]: r for r in await resp.json()}
    finally:
        await pipe.close()
    hours = 12 * 15 / 3600
    for mode, fraction in {"none": 1.0, "time-slicing": 2 * 0.5, "mps": 0.25, "hami": 0.5, "dra": 1.0}.items():
        close(api[mode]["allocated_gpu_hours"], fraction * hours)
    close(api["dra"]["cost"], hours * H100)
