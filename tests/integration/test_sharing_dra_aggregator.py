"""The aggregator's DRA view against the simulated API server: claims and slices are discovered and
watched, a pending pod whose GPU claim is not allocated is pending for ``dra_unallocated``, and
``gpucost_dra_claims`` counts GPU claims by namespace and state."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import config

from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.web.metrics import dra_families, quota_and_queue
from exporter.clients.kube import CORE_KINDS, DRA_KINDS, QUEUE_KINDS, Watcher, served_custom_kinds
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import parse_scenario

SCENARIO = """
prices: {"NVIDIA A100-SXM4-80GB": 2.50}
nodes:
  - {name: gpu-a100-dra, model: "NVIDIA A100-SXM4-80GB", gpus: 2, dra: true, mig: {1: [3g.40gb, 3g.40gb]}}
namespaces: [{name: ai-training}]
pods:
  - {name: train-0, namespace: ai-training, node: gpu-a100-dra, claims: [{name: train-gpu, devices: [gpu-0]}]}
  - {name: eval-0, namespace: ai-training, node: gpu-a100-dra,
     claims: [{name: eval-mig, devices: [gpu-1-mig-3g40gb-9-1]}]}
"""
STAMP = "2026-11-30T00:00:00Z"


def pending_pod(name: str, claim: str) -> dict[str, Any]:
    """A pod the scheduler could not place: its claim is not allocated (the scheduler's own message)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ai-training", "uid": f"uid-{name}", "creationTimestamp": STAMP},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 cannot allocate all claims."}]}}


def claim(name: str, *, device_class: str = "gpu.nvidia.com", allocated: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ai-training", "uid": f"uid-{name}", "creationTimestamp": STAMP},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}
    if allocated:
        obj["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-a100-dra", "device": "gpu-1"}]}}}
    return obj


def samples(kube: KubeState) -> dict[tuple[str, tuple[str, ...]], float]:
    families = [*dra_families(kube), *quota_and_queue(kube, now=time.time(), team_label="team")]
    return {(s.name, tuple(s.labels.values())): s.value for f in families for s in f.samples}


async def until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_pending_dra_pod_and_claim_states_from_the_simulated_api(tmp_path: Path) -> None:
    peers = SimPeers(parse_scenario(SCENARIO, "dra.yaml"), tmp_path, time.time())
    await peers.start()
    try:
        api_client = await config.new_client_from_config(config_file=str(peers.kubeconfig))
        async with api_client:
            served = await served_custom_kinds(api_client, QUEUE_KINDS + DRA_KINDS)
            assert [s.kind for s in served] == ["resourceclaims", "resourceslices"]
            kube = KubeState()
            watcher = Watcher(api_client, lambda kind, etype, obj: kube.handle(kind, etype, obj=obj),
                              specs=CORE_KINDS + served)
            task = asyncio.create_task(watcher.run())
            try:
                await until(lambda: watcher.all_synced)
                # the scenario's two claims are allocated; the slice publishes gpu-0 and gpu-1's two MIGs
                got = samples(kube)
                assert got[("gpucost_dra_claims", ("ai-training", "allocated"))] == 2
                assert got[("gpucost_dra_published_devices", ("gpu-a100-dra", "gpu"))] == 1
                assert got[("gpucost_dra_published_devices", ("gpu-a100-dra", "mig"))] == 2
                assert not kube.pending_gpu_pods()

                store = peers.cluster.store
                store.upsert("resourceclaims", claim("wait-gpu"))
                store.upsert("pods", pending_pod("wait-0", "wait-gpu"))
                store.upsert("resourceclaims", claim("nic", device_class="rdma.example.com"))
                store.upsert("pods", pending_pod("nic-0", "nic"))  # not a GPU claim: not a pending GPU pod
                await until(lambda: ("ai-training", "nic") in kube.dra.claims and kube.pending_gpu_pods())
                (pod,) = kube.pending_gpu_pods()
                assert pod.name == "wait-0" and kube.pending_reasons(pod) == ["dra_unallocated"]
                got = samples(kube)
                assert got[("gpucost_pending_gpu_pods", ("ai-training", "dra_unallocated"))] == 1
                assert got[("gpucost_dra_claims", ("ai-training", "allocated"))] == 2
                assert got[("gpucost_dra_claims", ("ai-training", "pending"))] == 1

                # the claim gets its allocation: the pod is still pending, no longer for dra_unallocated
                store.upsert("resourceclaims", claim("wait-gpu", allocated=True))
                await until(lambda: kube.dra.claims[("ai-training", "wait-gpu")].allocated)
                got = samples(kube)
                assert kube.pending_reasons(pod) == ["other"]
                assert ("gpucost_pending_gpu_pods", ("ai-training", "dra_unallocated")) not in got
                assert got[("gpucost_dra_claims", ("ai-training", "allocated"))] == 3
                assert ("gpucost_dra_claims", ("ai-training", "pending")) not in got

                # scheduled: it leaves the pending set but stays in the pod cache, holding no nvidia.com/gpu,
                # with its workload and priority class, like any GPU pod
                running = pending_pod("wait-0", "wait-gpu")
                running["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "wait", "controller": True}]
                running["spec"].update(nodeName="gpu-a100-dra", priorityClassName="gpu-batch")
                running["status"] = {"phase": "Running"}
                store.upsert("pods", running)
                await until(lambda: kube.pods[("ai-training", "wait-0")].phase == "Running")
                info = kube.pods[("ai-training", "wait-0")]
                assert (info.workload, info.workload_kind, info.priority_class) == ("wait", "Job", "gpu-batch")
                assert info.node == "gpu-a100-dra" and info.claims == ("wait-gpu",)
                assert not kube.pending_gpu_pods()
                # the scenario's DRA pods run too, and are known (their workload is the pod: no owner)
                assert kube.pods[("ai-training", "train-0")].workload == "train-0"

                gone: list[str] = []
                kube.on_pod_deleted = lambda p: gone.append(p.name)  # the aggregator closes its books at once
                store.delete("pods", "ai-training", name="wait-0")
                await until(lambda: ("ai-training", "wait-0") not in kube.pods)
                assert gone == ["wait-0"]
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await peers.close()
