"""DRA through `simulate`: the simulator publishes a ResourceSlice and allocated ResourceClaims, and the
kubelet reports dynamic_resources; the agent keys devices on (driver, pool, device), counts per claim,
resolves through the slice, splits a shared claim and charges adminAccess 0. Arithmetic in docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.clients.grpc_unary import unary_call
from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.sim.cluster import SimCluster
from exporter.sim.dra_objects import cdi_name
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import ScenarioError, parse_scenario
from tests.integration.test_golden import close, simulate

DRA = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0}
nodes:
  - {name: dra, model: "NVIDIA A100-SXM4-80GB", gpus: 3, dra: true, mig: {2: [3g.40gb, 1g.10gb]}}
pods:
  - {name: whole, namespace: team-a, node: dra, claims: [{name: whole-gpu, devices: [gpu-0]}], utilization: 0.5}
  - {name: s1, namespace: team-b, node: dra, claims: [{name: shared, devices: [gpu-1]}], utilization: 0.2}
  - {name: s2, namespace: team-b, node: dra, claims: [{name: shared, devices: [gpu-1]}], utilization: 0.4}
  - {name: mig, namespace: team-c, node: dra, claims: [{name: mig-claim, devices: [gpu-2-mig-3g40gb-9-1]}],
     utilization: 0.6}
  - {name: mon, namespace: team-d, node: dra, claims: [{name: monitor, devices: [gpu-0], admin_access: true}]}
"""


def test_simulator_publishes_slices_and_claims() -> None:
    cluster = SimCluster(parse_scenario(DRA, "dra.yaml"), 0.0)
    cluster.advance(0.0)
    (slice_,) = cluster.store.objects["resourceslices"].values()
    names = [d["name"] for d in slice_["spec"]["devices"]]
    assert names == ["gpu-0", "gpu-1", "gpu-2-mig-1g10gb-19-7", "gpu-2-mig-3g40gb-9-1"]  # MIG GPU: no gpu-2
    shared = cluster.store.objects["resourceclaims"][("team-b", "shared")]
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["s1", "s2"]
    monitor = cluster.store.objects["resourceclaims"][("team-d", "monitor")]
    assert monitor["status"]["allocation"]["devices"]["results"][0]["adminAccess"] is True
    assert cluster.layouts["dra"].resources == {}  # no device plugin on a DRA node


async def test_dra_golden(tmp_path: Path) -> None:
    """A100-SXM4-80GB at 2.00/h, 1 h.
    whole (gpu-0 claim): 1 GPU-h, GPU 0 reads 0.5 -> used 0.5; cost 2.00, idle cost 1.00.
    shared (gpu-1, claimed by s1 and s2, both team-b): 1/2 each -> 1 GPU-h for team-b; GPU 1 reads
    min(1, 0.2 + 0.4) = 0.6, each 1/2 x 0.6 = 0.3 used -> 0.6; cost 2.00, idle 0.4 GPU-h -> 0.80.
    mig (3g.40gb on a 7-slice GPU): 3/7 = 0.428571 GPU-h, used 3/7 x 0.6 = 0.257143; cost 0.857143.
    monitor (adminAccess on gpu-0): 0 -> nothing booked for team-d.
    Unallocated: 3 GPU-h - (1 + 1 + 3/7) = 4/7 = 0.571429 GPU-h (the free 1g.10gb slices too) -> 1.142857."""
    r = await simulate(DRA, tmp_path)
    a, b, c = r["team-a"], r["team-b"], r["team-c"]
    close(a["allocated_gpu_hours"], 1.0)
    close(a["used_gpu_hours"], 0.5)
    close(a["cost"], 2.0)
    close(a["idle_cost"], 1.0)
    close(b["allocated_gpu_hours"], 1.0)
    close(b["used_gpu_hours"], 0.6)
    close(b["cost"], 2.0)
    close(b["idle_cost"], 0.8)
    close(c["allocated_gpu_hours"], 3 / 7)
    close(c["used_gpu_hours"], 3 / 7 * 0.6)
    close(c["cost"], 6 / 7)
    assert "team-d" not in r or r["team-d"]["allocated_gpu_hours"] == 0
    close(r["__unallocated__"]["idle_gpu_hours"], 4 / 7)
    close(r["__unallocated__"]["cost"], 8 / 7)


async def test_shared_claim_is_half_each_by_pod(tmp_path: Path) -> None:
    """By pod (a claim is namespaced, so its pods share a namespace): 1/2 GPU-h each, used 1/2 x 0.6 = 0.3
    each (not s1 0.2 and s2 0.4: a claim's busy time is split like its allocation), cost 1.00 each."""
    r = await simulate(DRA, tmp_path, by="pod")
    for pod in ("s1", "s2"):
        close(r[pod]["allocated_gpu_hours"], 0.5)
        close(r[pod]["used_gpu_hours"], 0.3)
        close(r[pod]["cost"], 1.0)


@pytest.mark.parametrize(("pods", "error"), [
    ("[{name: a, namespace: n, node: dra, claims: [{name: c, devices: [gpu-7]}]}]",
     "pods[0].claims[0].devices: node dra publishes no 'gpu-7'"),
    ("[{name: a, namespace: n, node: dra, claims: [{name: c, devices: [gpu-0]}]},"
     " {name: b, namespace: n, node: dra, claims: [{name: d, devices: [gpu-0]}]}]",
     "pods[1].claims[0].devices: gpu-0 is allocated to claim c"),
    ("[{name: a, namespace: n, node: plain, claims: [{name: c, devices: [gpu-0]}]}]",
     "pods[0].claims: only for pods on a node with dra: true"),
])
def test_dra_scenario_errors_name_the_field(pods: str, error: str) -> None:
    text = ('prices: {"NVIDIA A100-SXM4-80GB": 2.0}\nnodes: [{name: dra, model: "NVIDIA A100-SXM4-80GB", gpus: 1, '
            'dra: true}, {name: plain, model: "NVIDIA A100-SXM4-80GB", gpus: 1}]\npods: ' + pods + "\n")
    with pytest.raises(ScenarioError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario(text, "s.yaml")


#: One claim of two whole GPUs: the kubelet lists both devices under the claim, and the second also
#: carries the first's CDI name (cdi_devices accumulates across a driver's devices).
PAIR = """
tick: 15s
duration: 1h
prices: {"NVIDIA A100-SXM4-80GB": 2.0}
nodes:
  - {name: dra, model: "NVIDIA A100-SXM4-80GB", gpus: 3, dra: true}
pods:
  - {name: pair, namespace: team-a, node: dra, claims: [{device_class: gpu.nvidia.com, count: 2}], utilization: 0.5}
"""


async def test_kubelet_lists_a_two_device_claim_with_accumulating_cdi_names(tmp_path: Path) -> None:
    """The simulated kubelet's List, decoded as sent: gpu-0 with its CDI name, gpu-1 with gpu-0's and its own."""
    peers = SimPeers(parse_scenario(PAIR, "pair.yaml"), tmp_path, 1_800_000_000.0)
    await peers.start()
    try:
        await peers.advance(0.0)
        socket_path = Path(peers.agent_env("dra")["GPUCOST_PODRESOURCES_SOCKET"])
        data = await unary_call(socket_path, "/v1.PodResourcesLister/List",
                                request=pb.ListPodResourcesRequest().SerializeToString(), timeout=10.0,
                                max_receive_bytes=1 << 20)
    finally:
        await peers.close()
    (pod,) = pb.ListPodResourcesResponse.FromString(data).pod_resources
    (ctr,) = pod.containers
    (dyn,) = ctr.dynamic_resources
    claim = peers.cluster.scenario.pods[0].claims[0]
    assert dyn.claim_name == claim.name and not ctr.devices
    cdi = [cdi_name("team-a", claim.name, device=d) for d in ("gpu-0", "gpu-1")]
    assert [(r.device_name, [c.name for c in r.cdi_devices]) for r in dyn.claim_resources] == [
        ("gpu-0", cdi[:1]), ("gpu-1", cdi)]


async def test_two_device_claim_is_two_gpu_hours_not_more(tmp_path: Path) -> None:
    """pair holds gpu-0 and gpu-1 for 1 h: 2 GPU-h (keyed on (driver, pool, device): the three CDI names
    the kubelet lists count for nothing), used 2 x 0.5 = 1.0, cost 2 x 2.00 = 4.00. Unallocated: gpu-2,
    1 GPU-h -> 2.00."""
    r = await simulate(PAIR, tmp_path)
    close(r["team-a"]["allocated_gpu_hours"], 2.0)
    close(r["team-a"]["used_gpu_hours"], 1.0)
    close(r["team-a"]["cost"], 4.0)
    close(r["__unallocated__"]["idle_gpu_hours"], 1.0)
