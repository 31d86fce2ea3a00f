"""Conservation through the real agent: the kubelet socket goes away beyond the charge cap, and the
published snapshot still accounts for every second of the node's capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.agent.service import Agent
from exporter.clock import VirtualClock
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import parse_scenario
from tests.integration.test_agent_durability import START, Node, _get

H100 = "NVIDIA H100 80GB HBM3"
OUTAGE = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods:
  - {name: p, namespace: t, node: h100, gpus: 1, utilization: 0.5}
  - {name: late, namespace: t, node: h100, gpus: 1, start: 130s, end: 160s, utilization: 0.5}
events: [{type: podresources_down, node: h100, from: 30s, to: 120s}]
"""


async def test_time_beyond_the_cap_without_pod_resources_is_unobserved(tmp_path: Path) -> None:
    """Ticks every 15 s to 180 s, cap 60 s, the kubelet socket gone over [30, 120).
    The last List answered at 15 s; until 75 s (75 - 15 <= 60) its holders stand: p pays 0..75.
    At 90 and 105 holders are unknown: 2 GPUs x 30 s = 60 GPU-s unobserved. From 120 it lists again.
    p: 75 + (180 - 105) = 150 s. late (no watch: to the tick) appears at 135 (charged [120, 135]) and is
    gone at 165: 15 + 15 = 30 s, two tick-resolution boundaries counted.
    Unallocated: 1 GPU x 150 s (the second GPU while known) - 30 (late) = 120.
    Sum: 150 + 30 + 120 + 60 = 360 = 2 GPUs x (180 - 0) s, started_at = the first tick."""
    clock = VirtualClock(START)
    peers = SimPeers(parse_scenario(OUTAGE, "outage.yaml"), tmp_path, START)
    await peers.start()
    node = Node(peers, clock)
    agent = Agent(node.settings(), clock=clock)
    await agent.start_http()
    try:
        for t in range(0, 181, 15):
            await node.step(agent, t)
        snap = json.loads(agent.published_json or b"{}")
        alloc = {h["pod"]: h["allocated_s"] for h in snap["holders"]}
        assert alloc == {"p": pytest.approx(150.0), "late": pytest.approx(30.0)}
        unobserved = {u["gpu_model"]: u["seconds"] for u in snap["unobserved"]}
        unallocated = {u["gpu_model"]: u["seconds"] for u in snap["unallocated"]}
        assert unobserved == {H100: pytest.approx(60.0)} and unallocated == {H100: pytest.approx(120.0)}
        assert snap["started_at"] == START
        assert sum(alloc.values()) + unobserved[H100] + unallocated[H100] == pytest.approx(2 * 180.0)
        _status, text = await _get(f"http://{agent.settings.listen}/metrics")
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["gpucost_agent_unobserved_gpu_seconds"].samples[0].value == pytest.approx(60.0)
        assert fams["gpucost_agent_tick_resolution_boundaries"].samples[0].value == 2
        await agent.close()
        # a restart resumes started_at and the unobserved counters from the state file (version 2)
        agent = Agent(node.settings(), clock=clock)
        assert agent.meter.epoch == snap["epoch"] and agent.meter.started_at == START
        assert dict(agent.meter.unobserved) == {H100: pytest.approx(60.0)}
    finally:
        await agent.close()
        await peers.close()
