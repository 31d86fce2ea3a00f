"""MPS: device-plugin replicas like time-slicing (1/replicas, the GPU's busy time split among holders),
told apart by the node label nvidia.com/gpu.sharing-strategy=mps and labelled sharing="mps" on the
agent's device metrics. Golden figures through `simulate` are computed by hand in each docstring."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.agent.service import Agent
from exporter.clock import VirtualClock
from exporter.config import AgentSettings
from exporter.sim.runner import SimPeers, free_port
from exporter.sim.scenario import parse_scenario
from tests.integration.test_golden import close, simulate

MPS = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0}
nodes: [{name: mps, model: "NVIDIA A100-SXM4-80GB", gpus: 1, sharing: mps, replicas: 4}]
pods:
  - {name: a, namespace: team-a, node: mps, gpus: 1, utilization: 0.3}
  - {name: b, namespace: team-b, node: mps, gpus: 1, utilization: 0.2}
  - {name: c, namespace: team-c, node: mps, gpus: 1, utilization: 0.1}
  - {name: d, namespace: team-d, node: mps, gpus: 1, start: 30m, utilization: 0.4}
"""


async def test_mps_node_with_four_replicas_golden(tmp_path: Path) -> None:
    """One A100 (2.00/h) as 4 MPS replicas, each 1/4 of the GPU.
    0-30m: a, b, c hold 3/4; DCGM reads 0.3+0.2+0.1 = 0.6, busy 0.6 x 0.5 h = 0.3 GPU-h split by fraction:
    0.1 each (under their 0.125 allocated). 30-60m: d joins, 4/4 held; DCGM reads min(1, 1.0) = 1, busy
    0.5 GPU-h split 4 ways: 0.125 each (= allocated).
    a, b, c: allocated 0.25 GPU-h, used 0.1 + 0.125 = 0.225, cost 0.25 x 2 = 0.50, idle 0.025 -> 0.05.
    d: allocated 0.125, used 0.125, cost 0.25, idle 0. Unallocated: 1/4 GPU x 0.5 h = 0.125 GPU-h -> 0.25."""
    r = await simulate(MPS, tmp_path)
    for ns in ("team-a", "team-b", "team-c"):
        close(r[ns]["allocated_gpu_hours"], 0.25)
        close(r[ns]["used_gpu_hours"], 0.225, ticks=1, fraction=0.25)
        close(r[ns]["cost"], 0.50)
        close(r[ns]["idle_cost"], 0.05, ticks=1, fraction=0.25, price=2.0)
    d = r["team-d"]
    close(d["allocated_gpu_hours"], 0.125, ticks=1, fraction=0.25)
    close(d["used_gpu_hours"], 0.125, ticks=1, fraction=0.25)
    close(d["cost"], 0.25, ticks=1, fraction=0.25, price=2.0)
    close(r["__unallocated__"]["idle_gpu_hours"], 0.125, ticks=1, fraction=0.25)
    close(r["__unallocated__"]["cost"], 0.25, ticks=1, fraction=0.25, price=2.0)


START = 1_800_000_000.0
NODES = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8}
nodes:
  - {name: mps, model: "NVIDIA L4", gpus: 1, sharing: mps, replicas: 4}
  - {name: ts, model: "NVIDIA L4", gpus: 1, time_slicing: 4}
  - {name: whole, model: "NVIDIA L4", gpus: 1}
pods:
  - {name: m, namespace: d, node: mps, gpus: 1, utilization: 0.2}
  - {name: t, namespace: d, node: ts, gpus: 1, utilization: 0.2}
"""


@pytest.fixture(name="peers")
async def _peers(tmp_path: Path) -> AsyncIterator[SimPeers]:
    peers = SimPeers(parse_scenario(NODES, "mps.yaml"), tmp_path, START)
    await peers.start()
    yield peers
    await peers.close()


async def _device_sharing(peers: SimPeers, node: str, *, api: bool,
                          kubeconfig: Path | None = None) -> tuple[str, dict[str, object]]:
    """Two ticks of a real agent on ``node``: the sharing label of its GPU, and its holder counters."""
    env = peers.agent_env(node)
    settings = AgentSettings(node_name=node, dcgm_url=env["GPUCOST_DCGM_URL"], listen=env["GPUCOST_LISTEN"],
                             podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
                             state_dir=Path(env["GPUCOST_STATE_DIR"]), tick=15.0, podresources_qps=1e6,
                             kubeconfig=kubeconfig or (peers.kubeconfig if api else Path("/nonexistent/kubeconfig")))
    clock = VirtualClock(START)
    agent = Agent(settings, clock=clock)
    await agent.start_http()
    try:
        for t in (0.0, 15.0):
            clock.set(START + t)
            await peers.advance(t)
            await agent.tick()
        async with aiohttp.ClientSession() as s, s.get(f"http://{settings.listen}/metrics") as resp:
            text = await resp.text()
    finally:
        await agent.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = fams["gpucost_device_utilization_ratio"].samples
    (power,) = fams["gpucost_device_power_watts"].samples
    assert power.labels["sharing"] == sample.labels["sharing"]
    holders = json.loads(agent.published_json or b"{}")["holders"]
    return sample.labels["sharing"], (holders[0] if holders else {})


async def test_device_metrics_name_the_sharing_mode(peers: SimPeers) -> None:
    """The node label tells MPS from time-slicing; a whole GPU is "none"; the accounting is the same:
    1/4 of a GPU for 15 s = 3.75 GPU-s, used 0.2 x 15 s = 3 GPU-s (the only holder gets the busy time)."""
    mps, m = await _device_sharing(peers, "mps", api=True)
    ts, t = await _device_sharing(peers, "ts", api=True)
    whole, _ = await _device_sharing(peers, "whole", api=True)
    assert (mps, ts, whole) == ("mps", "time-slicing", "none")
    for h in (m, t):
        assert h["fraction"] == 0.25
        assert h["allocated_s"] == pytest.approx(3.75)
        assert h["used_s"] == pytest.approx(3.0)


async def test_without_api_access_replicas_count_as_time_slicing(peers: SimPeers) -> None:
    """No kubeconfig: the node label is unknown, so MPS replicas are labelled time-slicing, charged the same."""
    mode, h = await _device_sharing(peers, "mps", api=False)
    assert mode == "time-slicing"
    assert h["fraction"] == 0.25 and h["allocated_s"] == pytest.approx(3.75)


async def test_api_server_down_keeps_ticking_as_time_slicing(peers: SimPeers, tmp_path: Path) -> None:
    """The kubeconfig names a port nobody listens on: every read fails, the agent still charges 1/4."""
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(peers.kubeconfig.read_text().replace(f":{peers.api_port}", f":{free_port()}"))
    mode, h = await _device_sharing(peers, "mps", api=True, kubeconfig=dead)
    assert mode == "time-slicing"
    assert h["fraction"] == 0.25 and h["allocated_s"] == pytest.approx(3.75)
