"""HAMi vGPU through `simulate`: the simulator writes HAMi's annotation and lists HAMi's plugin IDs,
which name the *other* GPU (the kubelet's pick is not HAMi's); the agent charges the annotation's GPU
by max(memory / framebuffer, cores / 100). Arithmetic by hand in each docstring."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.agent.service import Agent
from exporter.clock import VirtualClock
from exporter.config import AgentSettings
from exporter.sim.cluster import SimCluster
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import ScenarioError, parse_scenario
from tests.integration.test_golden import close, simulate

HAMI = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0}
nodes: [{name: hami, model: "NVIDIA A100-SXM4-80GB", gpus: 2, sharing: hami}]
pods:
  - {name: small, namespace: team-a, node: hami, gpus: 1, hami: {memory_mib: 10240, cores: 30}, utilization: 0.2}
  - {name: half, namespace: team-b, node: hami, gpus: 1, hami: {memory_mib: 40960}, utilization: 0.3}
"""

HALF = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0}
nodes: [{name: hami, model: "NVIDIA A100-SXM4-80GB", gpus: 1, sharing: hami}]
pods:
  - {name: x, namespace: team-x, node: hami, gpus: 1, hami: {memory_mib: 20480}, utilization: 0.6}
  - {name: y, namespace: team-y, node: hami, gpus: 1, hami: {memory_mib: 20480}, utilization: 0.1}
"""


def test_simulator_lists_plugin_ids_of_the_other_gpu() -> None:
    """The premise: both pods sit on GPU 0 by the annotation, while the kubelet lists GPU 1's slots."""
    cluster = SimCluster(parse_scenario(HAMI, "hami.yaml"), 0.0)
    cluster.advance(0.0)
    gpu0, gpu1 = (g.uuid for g in cluster.layouts["hami"].gpus)
    objs = {k[1]: o for k, o in cluster.store.objects["pods"].items()}
    assert objs["small"]["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == f"{gpu0},NVIDIA,10240,30:;"
    assert objs["half"]["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == f"{gpu0},NVIDIA,40960,0:;"
    listed = {a.pod.name: a.devices for a in cluster.pod_resources("hami")}
    assert listed == {"small": [f"{gpu1}-0"], "half": [f"{gpu1}-1"]}


async def test_hami_shares_golden(tmp_path: Path) -> None:
    """A100-SXM4-80GB: 81920 MiB = 80 GiB, 2.00/h, 2 GPUs. Both pods on GPU 0 (HAMi binpack).
    small: 10 GiB with 30 % cores -> max(0.125, 0.3) = 0.3; half: 40 GiB, cores unset -> 40/80 = 0.5.
    GPU 0 reads min(1, 0.2 + 0.3) = 0.5: busy 0.5 GPU-h split by fraction (0.8 held):
    small used min(0.3, 0.5 x 0.3/0.8 = 0.1875) = 0.1875; half used min(0.5, 0.5 x 0.5/0.8) = 0.3125.
    Costs: small 0.3 x 2 = 0.60 (idle 0.1125 -> 0.225); half 0.5 x 2 = 1.00 (idle 0.1875 -> 0.375).
    Unallocated: 2 GPU-h - 0.8 = 1.2 GPU-h -> 2.40. (With the listed IDs instead: 1/10 of GPU 1 each.)"""
    r = await simulate(HAMI, tmp_path)
    small, half, un = r["team-a"], r["team-b"], r["__unallocated__"]
    close(small["allocated_gpu_hours"], 0.3)
    close(small["used_gpu_hours"], 0.1875)
    close(small["cost"], 0.60)
    close(small["idle_cost"], 0.225)
    close(half["allocated_gpu_hours"], 0.5)
    close(half["used_gpu_hours"], 0.3125)
    close(half["cost"], 1.00)
    close(half["idle_cost"], 0.375)
    close(un["idle_gpu_hours"], 1.2)
    close(un["cost"], 2.40)


async def test_gpu_half_held_by_hami_pods_is_half_unallocated(tmp_path: Path) -> None:
    """One 80 GiB GPU, two pods of 20 GiB each (cores unset): 0.25 + 0.25 = 0.5 held, 0.5 GPU-h unallocated
    (1.00). DCGM reads 0.6 + 0.1 = 0.7: busy 0.7 GPU-h split evenly, each min(0.25, 0.35) = 0.25 used."""
    r = await simulate(HALF, tmp_path)
    for ns in ("team-x", "team-y"):
        close(r[ns]["allocated_gpu_hours"], 0.25)
        close(r[ns]["used_gpu_hours"], 0.25)
        close(r[ns]["cost"], 0.50)
    close(r["__unallocated__"]["idle_gpu_hours"], 0.5)
    close(r["__unallocated__"]["cost"], 1.00)


@pytest.mark.parametrize(("pods", "error"), [
    ("[{name: a, namespace: n, node: hami, gpus: 1, hami: {memory_mib: 90000}}]",
     "pods[0].hami: node hami has only 0 GPUs with 90000 MiB"),
    ("[{name: a, namespace: n, node: hami, gpus: 1, hami: {memory_mib: 10, cores: 101}}]",
     "pods[0].hami.cores: 101 is over 100"),
    ("[{name: a, namespace: n, node: plain, gpus: 1, hami: {memory_mib: 10}}]",
     "pods[0].hami: only for pods on a node with sharing: hami"),
])
def test_hami_scenario_errors_name_the_field(pods: str, error: str) -> None:
    text = ('prices: {"NVIDIA A100-SXM4-80GB": 2.0}\nnodes: [{name: hami, model: "NVIDIA A100-SXM4-80GB", gpus: 1, '
            'sharing: hami}, {name: plain, model: "NVIDIA A100-SXM4-80GB", gpus: 1}]\npods: ' + pods + "\n")
    with pytest.raises(ScenarioError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario(text, "s.yaml")


async def test_agent_starts_its_pod_watch_when_hami_is_present(tmp_path: Path) -> None:
    """Without GPUCOST_WATCH_PODS the agent on a HAMi node still watches its pods (annotations), labels
    both GPUs sharing="hami" and charges the annotation: 0.3 x 15 s = 4.5 GPU-s for small on GPU 0."""
    start = 1_800_000_000.0
    peers = SimPeers(parse_scenario(HAMI, "hami.yaml"), tmp_path, start)
    await peers.start()
    env = peers.agent_env("hami")
    settings = AgentSettings(node_name="hami", dcgm_url=env["GPUCOST_DCGM_URL"], listen=env["GPUCOST_LISTEN"],
                             podresources_socket=Path(env["GPUCOST_PODRESOURCES_SOCKET"]),
                             state_dir=Path(env["GPUCOST_STATE_DIR"]), tick=15.0, podresources_qps=1e6,
                             kubeconfig=peers.kubeconfig)
    assert settings.watch_pods is False
    clock = VirtualClock(start)
    agent = Agent(settings, clock=clock)
    await agent.start_http()
    try:
        for t in (0.0, 15.0):
            clock.set(start + t)
            await peers.advance(t)
            await agent.tick()
        assert agent._watch_task is not None and not agent._watch_task.done()
        async with aiohttp.ClientSession() as s, s.get(f"http://{settings.listen}/metrics") as resp:
            text = await resp.text()
    finally:
        await agent.close()
        await peers.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert {s.labels["sharing"] for s in fams["gpucost_device_utilization_ratio"].samples} == {"hami"}
    gpu0 = peers.cluster.layouts["hami"].gpus[0].uuid
    holders = {h["pod"]: h for h in json.loads(agent.published_json or b"{}")["holders"]}
    assert holders["small"]["gpu_uuid"] == gpu0 and holders["small"]["device_id"] == gpu0
    assert holders["small"]["allocated_s"] == pytest.approx(4.5)
