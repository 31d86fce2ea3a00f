"""Exact pod boundaries: pods shorter than, and not aligned to, the 15 s tick are charged their real
holding time (startTime to finishedAt, to the second) through the real agents with their own-node pod
watch, the real aggregator and the simulator's real API server, kubelet socket and DCGM endpoint."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.test_golden import simulate

SECOND_H = 1 / 3600  # one second in hours: the tolerance per pod (timestamps have one-second resolution)

SHORT = """
tick: 15s
duration: 5m
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 4}]
pods:
  - {name: five, namespace: short, node: h100, gpus: 1, start: 100s, end: 105s, utilization: 0.5}
  - {name: twenty, namespace: short, node: h100, gpus: 1, start: 100s, end: 120s, utilization: 0.5}
  - {name: thirty-seven, namespace: short, node: h100, gpus: 1, start: 100s, end: 137s, utilization: 0.5}
  - {name: offbeat, namespace: long, node: h100, gpus: 1, start: 52s, end: 203s, utilization: 0.8}
"""


def near(got: float | Decimal, exact_seconds: float) -> None:
    got = float(got)
    assert abs(got - exact_seconds / 3600) <= SECOND_H + 1e-9, f"{got * 3600:.3f} s vs exact {exact_seconds} s"


async def test_short_pods_are_charged_to_the_second(tmp_path: Path) -> None:
    """Ticks at 0, 15, ..., 300 s.
    five [100, 105]: listed at no tick (gone before 105); only the watch saw it: 5 s x 1 GPU, unmeasured
    (no DCGM reading of it), used 0.
    twenty [100, 120]: tick 105 charges 105 - 100 = 5 s (from its startTime), tick 120 charges
    120 - 105 = 15 s up to its finishedAt at its last reading: 20 s, used 20 x 0.5 = 10 s.
    thirty-seven [100, 137]: 5 + 15 + 15 (tick 135) + 2 (137 - 135 at tick 150) = 37 s, used 18.5 s.
    offbeat [52, 203]: 60 - 52 = 8, then 15 x 9 (ticks 75..195), then 203 - 195 = 8: 151 s, used
    151 x 0.8 = 120.8 s. Cost of offbeat: 151 / 3600 h x 4.00 = 0.167778.
    Unallocated: 4 GPUs x 300 s - (5 + 20 + 37 + 151) = 1200 - 213 = 987 s.
    (Tick resolution would have charged: five 0 s, twenty 15 s, thirty-seven 45 s, offbeat 150 s.)"""
    pods = await simulate(SHORT, tmp_path, by="pod")
    near(pods["five"]["allocated_gpu_hours"], 5)
    near(pods["five"]["unmeasured_gpu_hours"], 5)
    assert pods["five"]["used_gpu_hours"] == 0
    near(pods["twenty"]["allocated_gpu_hours"], 20)
    near(pods["twenty"]["used_gpu_hours"], 10)
    near(pods["thirty-seven"]["allocated_gpu_hours"], 37)
    near(pods["thirty-seven"]["used_gpu_hours"], 18.5)
    near(pods["offbeat"]["allocated_gpu_hours"], 151)
    near(pods["offbeat"]["used_gpu_hours"], 120.8)
    assert float(pods["offbeat"]["cost"]) == pytest.approx(151 / 3600 * 4.0, abs=SECOND_H * 4.0)
    by_ns = await simulate(SHORT, tmp_path / "ns")
    near(by_ns["__unallocated__"]["idle_gpu_hours"], 987)
