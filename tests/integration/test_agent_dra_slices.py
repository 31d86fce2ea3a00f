"""The agent lists only its own node's NVIDIA ResourceSlices (field selectors ``spec.driver`` and
``spec.nodeName``), against the simulated API server, which serves both selectors as the real one does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from exporter.agent.holders.dra import DeviceKey
from exporter.agent.kubeinfo import KubeInfo
from exporter.model.pod_resources import ClaimDevice, ContainerClaim
from exporter.sim.kube.objects import iso
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import parse_scenario

START = 1_800_000_000.0
NV = "gpu.nvidia.com"
SCENARIO = """
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: dra, model: "NVIDIA H100 80GB HBM3", gpus: 1, dra: true}
  - {name: other, model: "NVIDIA H100 80GB HBM3", gpus: 1, dra: true}
pods:
  - {name: p, namespace: ml, node: dra, claims: [{device_class: gpu.nvidia.com}]}
"""
#: Another driver's slice on the same node, with a device named like a GPU.
NIC_SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": "dra-nic.example.com-abcde", "uid": "nic-slice", "creationTimestamp": iso(START)},
             "spec": {"driver": "nic.example.com", "nodeName": "dra", "pool": {"name": "dra", "generation": 1,
                                                                              "resourceSliceCount": 1},
                      "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"},
                                                                   "uuid": {"string": "NIC-0"}}}]}}


@pytest.fixture(name="peers")
async def _peers(tmp_path: Path) -> AsyncIterator[SimPeers]:
    peers = SimPeers(parse_scenario(SCENARIO, "slices.yaml"), tmp_path, START)
    await peers.start()
    peers.cluster.store.upsert("resourceslices", NIC_SLICE)
    yield peers
    await peers.close()


async def _names(peers: SimPeers, selector: str) -> list[str]:
    url = f"http://127.0.0.1:{peers.api_port}/apis/resource.k8s.io/v1/resourceslices"
    async with aiohttp.ClientSession() as s, s.get(url, params={"fieldSelector": selector},
                                                   headers={"Authorization": "Bearer sim-token"}) as resp:
        assert resp.status == 200
        return sorted(i["spec"]["driver"] + "@" + i["spec"]["nodeName"] for i in (await resp.json())["items"])


async def test_simulated_api_selects_slices_by_driver_and_node(peers: SimPeers) -> None:
    """Three slices: NVIDIA on dra, NVIDIA on other, nic.example.com on dra."""
    assert await _names(peers, "spec.nodeName=dra") == ["gpu.nvidia.com@dra", "nic.example.com@dra"]
    assert await _names(peers, "spec.driver=gpu.nvidia.com") == ["gpu.nvidia.com@dra", "gpu.nvidia.com@other"]
    assert await _names(peers, f"spec.driver={NV},spec.nodeName=dra") == ["gpu.nvidia.com@dra"]


async def test_agent_lists_its_nodes_nvidia_slices_only(peers: SimPeers) -> None:
    """The agent's one slice list selects driver and node; it resolves gpu-0 to dra's GPU."""
    info = KubeInfo(node="dra", kubeconfig=peers.kubeconfig, timeout=5.0)
    claim = ContainerClaim("ml", "p", "main", "ml", peers.cluster.scenario.pods[0].claims[0].name,
                           (ClaimDevice(NV, "dra", "gpu-0"),))
    try:
        ctx = await info.context([], None, claims=[claim])
    finally:
        await info.close()
    (selector,) = [sel for kind, sel in peers.api.selections if kind == "resourceslices"]
    assert set(selector.split(",")) == {f"spec.driver={NV}", "spec.nodeName=dra"}
    gpu0 = peers.cluster.layouts["dra"].gpus[0].uuid
    assert {k: d.uuid for k, d in ctx.dra_slices.items()} == {DeviceKey(NV, "dra", "gpu-0"): gpu0}
