"""Pod `framebuffer` and `utilization: {per_device: [...]}`: parsed and validated (one line naming file and
field, exit 2), then served by the simulator's DCGM text as framebuffer used and per-device utilisation.

Physical framebuffers (SCENARIO.md, `exporter/sim/hardware.py`): H100 81559 MiB, A100-80GB 81920 MiB, so a
1g.10gb instance of an A100 gets 81920 x 1/7 = 11702.86 MiB; L4 23034 MiB.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.sim.cluster import SimCluster
from exporter.sim.scenario import ScenarioError, load_scenario, parse_scenario
from exporter.sim.sizes import parse_bytes

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
MIB = 2**20
GIB = 2**30
BASE = f"""
tick: 15s
duration: 1h
prices: {{"{H100}": 4.0, "{A100}": 2.5, "{L4}": 0.8}}
nodes:
  - {{name: n0, model: "{H100}", gpus: 4}}
  - {{name: mig, model: "{A100}", gpus: 1, mig: {{0: [1g.10gb, 1g.10gb]}}}}
  - {{name: ts, model: "{L4}", gpus: 1, time_slicing: 4}}
"""


@pytest.mark.parametrize(("text", "size"), [
    (6442450944, 6 * GIB), ("6GiB", 6 * GIB), ("512MiB", 512 * MIB), ("1.5GiB", 3 * GIB // 2),
    ("80GB", 80 * 10**9), ("2 KiB", 2048), ("100", 100), ("7B", 7), (0, 0), (4096.0, 4096),
])
def test_sizes(text: object, size: int) -> None:
    """Binary units are powers of 1024 (6GiB = 6 x 1024^3), decimal ones powers of 1000 (80GB = 80e9)."""
    assert parse_bytes(text) == size


@pytest.mark.parametrize("text", ["6 gigs", "GiB", "-1GiB", -1, True, 1.5, "", None, [6]])
def test_not_sizes(text: object) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_bytes(text)


@pytest.mark.parametrize(("pod", "message"), [
    ("{name: p, namespace: a, node: n0, framebuffer: 6 gigs}",
     "scenario.yaml: pods[0].framebuffer: not a size: '6 gigs'"),
    ("{name: p, namespace: a, node: n0, framebuffer: 90GiB}",
     f"scenario.yaml: pods[0].framebuffer: 90GiB is more than the 81559 MiB of one {H100} on node n0"),
    ("{name: p, namespace: a, node: mig, resource: nvidia.com/mig-1g.10gb, framebuffer: 12GiB}",
     "scenario.yaml: pods[0].framebuffer: 12GiB is more than the 11703 MiB of one nvidia.com/mig-1g.10gb on node mig"),
    ("{name: p, namespace: a, node: n0, framebuffer: [{at: 0m, value: 1GiB}, {at: 5m, value: -3}]}",
     "scenario.yaml: pods[0].framebuffer[1].value: not a size: -3"),
    ("{name: p, namespace: a, node: n0, framebuffer: [{at: soon, value: 1GiB}]}",
     "scenario.yaml: pods[0].framebuffer[0].at: not a duration: 'soon'"),
    ("{name: p, namespace: a, node: n0, framebuffer: [{at: 0m, size: 1GiB}]}",
     "scenario.yaml: pods[0].framebuffer[0].size: unknown field"),
    ("{name: p, namespace: a, node: n0, framebuffer: []}",
     "scenario.yaml: pods[0].framebuffer: give a size or at least one {at, value} step"),
    ("{name: p, namespace: a, node: n0, gpus: 4, utilization: {per_device: [0.9, 0.9, 0.0]}}",
     "scenario.yaml: pods[0].utilization.per_device: gives 3 for 4 GPUs (one value per device the pod holds)"),
    ("{name: p, namespace: a, node: n0, gpus: 2, utilization: {per_device: [0.9, 1.5]}}",
     "scenario.yaml: pods[0].utilization.per_device[1]: 1.5 is out of range"),
    ("{name: p, namespace: a, node: n0, gpus: 2, utilization: {per_device: [0.9, low]}}",
     "scenario.yaml: pods[0].utilization.per_device[1]: expected a number, got 'low'"),
    ("{name: p, namespace: a, node: n0, gpus: 2, utilization: {per_gpu: [0.9, 0.1]}}",
     "scenario.yaml: pods[0].utilization.per_gpu: unknown field"),
    ("{name: p, namespace: a, node: ts, gpus: 2, utilization: {per_device: [0.9, 0.1]}}",
     "scenario.yaml: pods[0].utilization.per_device: node ts shares its GPUs (time-slicing)"),
])
def test_bad_pod_fields(pod: str, message: str) -> None:
    """One line naming the file and the field."""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(BASE + f"pods: [{pod}]\n", "scenario.yaml")
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_bad_pod_field_exits_2_with_one_line(write_scenario: Callable[[str], Path], tmp_path: Path) -> None:
    path = write_scenario(BASE + "pods: [{name: p, namespace: a, node: n0, gpus: 2, "
                                 "utilization: {per_device: [0.9]}}]\n")
    done = subprocess.run([sys.executable, "-m", "exporter", "simulate", "--scenario", str(path),
                           "--ledger", str(tmp_path / "l.db")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu-cost-exporter: error: scenario.yaml: pods[0].utilization.per_device: gives 1 for 2 GPUs "
        "(one value per device the pod holds)"]


def test_parsed_fields() -> None:
    s = parse_scenario(BASE + """pods:
  - {name: a, namespace: x, node: n0, gpus: 2, utilization: {per_device: [0.9, 0.0]},
     framebuffer: [{at: 20m, value: 70GiB}, {at: 0m, value: 50GiB}]}
  - {name: b, namespace: x, node: n0, gpus: 1, utilization: 0.5}
""", "s.yaml")
    a, b = s.pods
    assert a.per_device == (0.9, 0.0) and a.framebuffer == [(0.0, 50 * GIB), (1200.0, 70 * GIB)]
    assert [a.util_at(0.0, 0), a.util_at(0.0, 1)] == [0.9, 0.0]
    assert [a.framebuffer_at(0.0), a.framebuffer_at(1199.0), a.framebuffer_at(1200.0)] == [50 * GIB, 50 * GIB,
                                                                                           70 * GIB]
    assert b.per_device is None and b.framebuffer_at(0.0) is None and b.util_at(0.0, 0) == 0.5


def _served(cluster: SimCluster, node: str, family: str) -> dict[tuple[str, str], float]:
    """(gpu index, GPU_I_ID or '') -> value of one DCGM family on ``node``."""
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(cluster.render_dcgm(node)):
        for sample in fam.samples:
            if sample.name == family:
                out[(sample.labels["gpu"], sample.labels.get("GPU_I_ID", ""))] = sample.value
    return out


FIELDS = BASE + """pods:
  - {name: ddp, namespace: x, node: n0, gpus: 3, utilization: {per_device: [0.9, 0.4, 0.0]},
     framebuffer: [{at: 0m, value: 6GiB}, {at: 20m, value: 10GiB}]}
  - {name: plain, namespace: x, node: n0, gpus: 1, utilization: 0.5}
  - {name: small, namespace: x, node: mig, resource: nvidia.com/mig-1g.10gb, utilization: 0.3, framebuffer: 1000000}
  - {name: s1, namespace: x, node: ts, utilization: 0.2, framebuffer: 3GiB}
  - {name: s2, namespace: x, node: ts, utilization: 0.1, framebuffer: 5GiB}
"""


def test_dcgm_serves_per_device_utilisation_and_framebuffer() -> None:
    """ddp holds GPUs 0-2 (allocation order): GR engine 0.9, 0.4, 0.0; each reads its 6 GiB = 6144 MiB, then
    10 GiB = 10240 MiB from 20m. plain (no framebuffer) keeps the simulator's default: 300 + 0.7 x 81559 =
    57391 MiB. A MIG instance's framebuffer is its own: small's 1,000,000 bytes = 0.95 MiB, DCGM counts whole
    MiB: 1; the other instance, unheld, reads 300. The time-sliced L4 reads its holders' sum:
    3 + 5 GiB = 8192 MiB (and their utilisation 0.2 + 0.1 = 0.3)."""
    cluster = SimCluster(parse_scenario(FIELDS, "f.yaml"), 0.0)
    cluster.advance(600.0)
    util = _served(cluster, "n0", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert [util[(str(i), "")] for i in range(4)] == [0.9, 0.4, 0.0, 0.5]
    fb = _served(cluster, "n0", "DCGM_FI_DEV_FB_USED")
    assert [fb[(str(i), "")] for i in range(4)] == [6144, 6144, 6144, 57391]
    free = _served(cluster, "n0", "DCGM_FI_DEV_FB_FREE")
    assert free[("0", "")] == 81559 - 6144
    mig = _served(cluster, "mig", "DCGM_FI_DEV_FB_USED")
    assert sorted(mig.values()) == [1, 300]
    shared = _served(cluster, "ts", "DCGM_FI_DEV_FB_USED")
    assert shared == {("0", ""): 8192}
    assert _served(cluster, "ts", "DCGM_FI_PROF_GR_ENGINE_ACTIVE") == {("0", ""): pytest.approx(0.3)}
    cluster.advance(1200.0)
    fb = _served(cluster, "n0", "DCGM_FI_DEV_FB_USED")
    assert [fb[(str(i), "")] for i in range(3)] == [10240, 10240, 10240]


def test_default_scenario_gives_framebuffer_where_recommendations_need_it() -> None:
    """Every running pod of the built-in scenario says how much memory it uses (so its recommendation
    rests on a measured peak, or says it is unmeasured on a shared GPU); per-device utilisation is not
    used there (its utilisations are the golden numbers' inputs)."""
    from tests.conftest import REPO

    s = load_scenario(REPO / "exporter" / "sim" / "scenarios" / "default.yaml")
    assert [p.name for p in s.pods if p.node is not None and not p.framebuffer] == []
    assert all(p.per_device is None for p in s.pods)
