"""The simulator's peers speak the real protocols: prometheus-client parses its DCGM text, a real
grpc.aio client lists pod resources over the unix socket, and kubernetes_asyncio lists and watches
through the generated kubeconfig, including a forced 410 Gone and bookmarks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from kubernetes_asyncio import client, config
from prometheus_client.parser import text_string_to_metric_families

from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.clients.proto import podresources_v1_pb2_grpc as pb_grpc
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import load_scenario
from tests.conftest import REPO

DEFAULT = REPO / "exporter" / "sim" / "scenarios" / "default.yaml"


@pytest.fixture(name="peers")
async def _peers(tmp_path: Path) -> AsyncIterator[SimPeers]:
    peers = SimPeers(load_scenario(DEFAULT), tmp_path, time.time())
    await peers.start()
    await peers.advance(1800.0)  # 30 minutes in: batch-infer and dev-dan are running
    yield peers
    await peers.close()


async def test_dcgm_text_parses_with_prometheus_client(peers: SimPeers) -> None:
    """The A100 MIG node serves per-instance GR engine values equal to the holders' utilisation."""
    async with aiohttp.ClientSession() as s, s.get(peers.nodes["gpu-a100-0"].dcgm.url) as resp:
        text = await resp.text()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    gr = fams["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples
    by_pod = {s.labels.get("pod"): s.value for s in gr}
    assert by_pod["llm-serve-6c9f7-abcde"] == pytest.approx(0.65)
    assert by_pod["embed-5d8b9-ccccc"] == pytest.approx(0.02)
    assert by_pod["batch-infer-0"] == pytest.approx(0.8)
    mig = [s for s in gr if "GPU_I_PROFILE" in s.labels]
    assert len(mig) == 9  # 2 x 3g.40gb + 7 x 1g.10gb
    util = fams["DCGM_FI_DEV_GPU_UTIL"].samples
    assert all("GPU_I_ID" not in s.labels for s in util)  # GPU_UTIL does not exist per MIG instance
    assert {s.labels["modelName"] for s in gr} == {"NVIDIA A100-SXM4-80GB"}


async def test_time_sliced_gpu_utilisation_is_sum_capped(peers: SimPeers) -> None:
    """L4 GPU 0 is shared by bob (0.25), carol (0.35) and dan (0.5): DCGM reads min(1, 1.1) = 1."""
    async with aiohttp.ClientSession() as s, s.get(peers.nodes["gpu-l4-0"].dcgm.url) as resp:
        text = await resp.text()
    gr = next(f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    values = sorted(s.value for s in gr.samples)
    assert values == [0.0, 0.0, 0.0, 1.0]


async def test_dcgm_down_refuses_connections(peers: SimPeers) -> None:
    """During dcgm_down (40m-50m on the L4 node) the endpoint refuses connections."""
    await peers.advance(2500.0)
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as s, s.get(peers.nodes["gpu-l4-0"].dcgm.url):
            pass
    await peers.advance(3100.0)
    async with aiohttp.ClientSession() as s, s.get(peers.nodes["gpu-l4-0"].dcgm.url) as resp:
        assert resp.status == 200


async def test_podresources_grpc(peers: SimPeers) -> None:
    """A real grpc.aio client: List, GetAllocatableResources and Get over the unix socket."""
    sock = peers.nodes["gpu-l4-0"].kubelet.socket_path
    async with grpc.aio.insecure_channel(f"unix://{sock}") as channel:
        stub = pb_grpc.PodResourcesListerStub(channel)
        listed = await stub.List(pb.ListPodResourcesRequest())
        pods = {p.name: [d for c in p.containers for d in c.devices] for p in listed.pod_resources}
        assert sorted(pods) == ["dev-bob", "dev-carol", "dev-dan"]
        assert len(pods["dev-dan"][0].device_ids) == 2
        assert all("::" in i for devs in pods.values() for d in devs for i in d.device_ids)
        alloc = await stub.GetAllocatableResources(pb.AllocatableResourcesRequest())
        assert sum(len(d.device_ids) for d in alloc.devices) == 16  # 4 GPUs x 4 replicas
        got = await stub.Get(pb.GetPodResourcesRequest(pod_name="dev-bob", pod_namespace="ai-dev"))
        assert got.pod_resources.name == "dev-bob"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Get(pb.GetPodResourcesRequest(pod_name="nope", pod_namespace="ai-dev"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_kubernetes_asyncio_list_and_watch_with_410_and_bookmarks(peers: SimPeers) -> None:
    """The real client lists typed pods, watches changes, sees bookmarks, and gets 410 after compaction."""
    api_client = await config.new_client_from_config(config_file=str(peers.kubeconfig))
    async with api_client:
        v1 = client.CoreV1Api(api_client)
        pods = await v1.list_pod_for_all_namespaces()
        names = {p.metadata.name for p in pods.items}
        assert {"train-llm-0", "train-big-0", "dev-dan"} <= names
        pending = next(p for p in pods.items if p.metadata.name == "train-big-0")
        assert pending.status.phase == "Pending"
        assert pending.status.conditions[0].reason == "Unschedulable"
        assert "Insufficient nvidia.com/gpu" in pending.status.conditions[0].message
        serve = next(p for p in pods.items if p.metadata.name == "llm-serve-6c9f7-abcde")
        assert serve.metadata.owner_references[0].kind == "ReplicaSet"
        nodes = await v1.list_node(label_selector="nvidia.com/gpu.present=true")
        assert len(nodes.items) == 7  # training, inference, dev, research's spot H100s and H200s, shared DRA + HAMi
        assert nodes.items[0].metadata.labels["nvidia.com/gpu.count"] == "8"
        rv = pods.metadata.resource_version

        # Watch from the list's version: the end of finetune-0 at 75m arrives as DELETED, then a bookmark.
        resp = await v1.list_pod_for_all_namespaces(watch=True, resource_version=rv, allow_watch_bookmarks=True,
                                                    timeout_seconds=5, _preload_content=False)
        await peers.advance(75 * 60.0)
        seen: list[str] = []
        while True:
            line = await resp.content.readline()
            if not line:
                break
            event = json.loads(line)
            seen.append(event["type"] + ":" + event["object"]["metadata"].get("name", ""))
            if event["type"] == "BOOKMARK":
                break
        resp.release()
        assert "DELETED:finetune-0" in seen and seen[-1].startswith("BOOKMARK")

        peers.cluster.store.expire_history()
        resp = await v1.list_pod_for_all_namespaces(watch=True, resource_version=rv, timeout_seconds=5,
                                                    _preload_content=False)
        event = json.loads(await resp.content.readline())
        resp.release()
        assert event["type"] == "ERROR" and event["object"]["code"] == 410


async def test_field_and_label_selectors(peers: SimPeers) -> None:
    """Field selectors (spec.nodeName) and namespaced lists filter like the API server."""
    api_client = await config.new_client_from_config(config_file=str(peers.kubeconfig))
    async with api_client:
        v1 = client.CoreV1Api(api_client)
        on_l4 = await v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-l4-0")
        workloads = {p.metadata.name for p in on_l4.items if p.metadata.namespace != "gpu-operator"}
        assert workloads == {"dev-bob", "dev-carol", "dev-dan"}  # beside the node's dcgm-exporter pod
        inf = await v1.list_namespaced_pod("ai-inference", label_selector="app=embed")
        assert len(inf.items) == 3
        quotas = await v1.list_resource_quota_for_all_namespaces()
        used = {q.metadata.namespace: q.status.used["requests.nvidia.com/gpu"] for q in quotas.items}
        assert used == {"ai-training": "15", "ai-inference": "1", "ai-dev": "4"}
        events = await v1.list_event_for_all_namespaces()
        reasons = {e.reason for e in events.items}
        assert {"FailedScheduling", "FailedCreate"} <= reasons
    await asyncio.sleep(0)


async def test_queue_kinds_served_only_when_installed(tmp_path: Path) -> None:
    """Volcano Queues and Kueue ClusterQueues/LocalQueues are served (with discovery) when the scenario has
    them, and the aggregator's state turns them into quota by namespace with a source; absent CRDs 404."""
    from exporter.aggregator.kube.state import KubeState
    from exporter.clients.kube import Watcher, served_custom_kinds
    from exporter.sim.scenario import parse_scenario

    text = """
prices: {"NVIDIA H100 80GB HBM3": 4}
nodes: [{name: n, model: "NVIDIA H100 80GB HBM3", gpus: 4}]
namespaces: [{name: a}, {name: b}]
pods: [{name: p, namespace: b, node: n, gpus: 3}]
queues:
  - {kind: kueue, name: cq, gpus: 6, namespaces: [b]}
"""
    peers = SimPeers(parse_scenario(text, "q.yaml"), tmp_path, time.time())
    await peers.start()
    try:
        api_client = await config.new_client_from_config(config_file=str(peers.kubeconfig))
        async with api_client:
            served = await served_custom_kinds(api_client)
            assert [s.kind for s in served] == ["clusterqueues", "localqueues", "workloads"]  # no Volcano CRD
            state = KubeState()
            watcher = Watcher(api_client, lambda kind, etype, obj: state.handle(kind, etype, obj=obj), specs=served)
            task = asyncio.create_task(watcher.run())
            for _ in range(200):
                if watcher.all_synced:
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert state.kueue_cluster_queues == {"cq": (6.0, 3.0)}
        assert state.quota_sources() == {("b", "kueue"): (6.0, 3.0)}
    finally:
        await peers.close()


def _owner_mode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_mode & 0o7777


async def test_exporters_answer_at_their_pods_address_as_their_node_like_a_real_node(peers: SimPeers) -> None:
    """Each node's exporter pod (the GPU Operator's labels, in gpu-operator) shows the address its exporter
    answers on as status.podIP; nothing answers on the node's InternalIP; Hostname is the node's name."""
    import os

    api_client = await config.new_client_from_config(config_file=str(peers.kubeconfig))
    async with api_client:
        v1 = client.CoreV1Api(api_client)
        for node, ports in peers.nodes.items():
            (pod,) = (await v1.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node}", label_selector="app=nvidia-dcgm-exporter")).items
            assert pod.metadata.namespace == "gpu-operator" and pod.status.phase == "Running"
            assert ports.dcgm.url == f"http://{pod.status.pod_ip}:{ports.dcgm.port}/metrics"
            internal = next(a.address for a in (await v1.read_node(node)).status.addresses if a.type == "InternalIP")
            assert internal != pod.status.pod_ip and pod.status.host_ip == internal
            async with aiohttp.ClientSession() as s:
                async with s.get(ports.dcgm.url) as resp:
                    assert f'Hostname="{node}"' in await resp.text()
                with pytest.raises(aiohttp.ClientConnectionError):
                    await s.get(f"http://{internal}:{ports.dcgm.port}/metrics")
            if os.geteuid() == 0:  # as a kubelet makes them: root's, folder 0750, socket 0755, state 0755
                sock = ports.kubelet.socket_path
                assert [_owner_mode(p) for p in (sock, sock.parent, ports.state_dir)] == [
                    (0, 0o755), (0, 0o750), (0, 0o755)]


async def test_host_network_exporters_answer_on_their_nodes_address(tmp_path: Path) -> None:
    """exporter_host_network (and Gaudi's exporter, hostNetwork upstream): the pod IP is the node's InternalIP
    and the exporter answers there; a plain node's exporter does not; exporter_hostname is what it reports."""
    from exporter.sim.scenario import parse_scenario

    text = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8, "HL-225": 2.0}
nodes:
  - {name: hn, model: "NVIDIA L4", gpus: 1, exporter_host_network: true, exporter_hostname: elsewhere}
  - {name: plain, model: "NVIDIA L4", gpus: 1}
  - {name: gaudi, model: "HL-225", gpus: 1, vendor: gaudi}
"""
    peers = SimPeers(parse_scenario(text, "hostnet.yaml"), tmp_path, time.time())
    await peers.start()
    try:
        pods = {p["spec"]["nodeName"]: p for p in peers.cluster.store.objects["pods"].values()}
        nodes = peers.cluster.store.objects["nodes"]
        for name, on_node in (("hn", True), ("plain", False), ("gaudi", True)):
            internal = next(a["address"] for n in nodes.values() if n["metadata"]["name"] == name
                            for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            assert (pods[name]["status"]["podIP"] == internal) is on_node, name
            assert peers.nodes[name].dcgm.host == pods[name]["status"]["podIP"], name
        assert pods["gaudi"]["metadata"]["labels"] == {"app": "metric-exporter-ds"}
        async with aiohttp.ClientSession() as s, s.get(peers.nodes["hn"].dcgm.url) as resp:
            assert 'Hostname="elsewhere"' in await resp.text()
    finally:
        await peers.close()
