"""The pod-resources client's own HTTP/2 gRPC calls against a real gRPC server (grpc.aio) on a unix socket:
what a kubelet can answer — a large List, its rate limit, an old kubelet without GetAllocatableResources, a
hang, a restart that recreates the socket — each turned into the error the agent acts on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from exporter.clients.errors import PeerBadResponse, PeerRateLimited, PeerUnavailable
from exporter.clients.grpc_unary import RESOURCE_EXHAUSTED, GrpcError, unary_call
from exporter.clients.podresources import PodResourcesClient
from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.clients.proto import podresources_v1_pb2_grpc as pb_grpc
from exporter.model.pod_resources import ClaimDevice, ContainerClaim

METHOD_LIST = "/v1.PodResourcesLister/List"


@dataclass
class Kubelet(pb_grpc.PodResourcesListerServicer):  # type: ignore[misc]  # generated, untyped
    """Answers as told: ``pods`` for List, or abort with ``abort``; allocatable UNIMPLEMENTED unless set."""

    pods: list[pb.PodResources] = field(default_factory=list)
    abort: tuple[grpc.StatusCode, str] | None = None
    delay: float = 0.0
    allocatable: list[pb.ContainerDevices] | None = None

    async def List(self, request: Any, context: Any) -> pb.ListPodResourcesResponse:
        await asyncio.sleep(self.delay)
        if self.abort is not None:
            await context.abort(*self.abort)
        return pb.ListPodResourcesResponse(pod_resources=self.pods)

    async def GetAllocatableResources(self, request: Any, context: Any) -> pb.AllocatableResourcesResponse:
        if self.allocatable is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this kubelet")
        return pb.AllocatableResourcesResponse(devices=self.allocatable)


Serve = Callable[[Kubelet], Any]


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Serve]:
    servers: list[grpc.aio.Server] = []

    async def start(kubelet: Kubelet) -> Path:
        server = grpc.aio.server(options=[("grpc.max_send_message_length", 64 << 20)])
        pb_grpc.add_PodResourcesListerServicer_to_server(kubelet, server)
        path = tmp_path / "kubelet.sock"
        server.add_insecure_port(f"unix://{path}")
        await server.start()
        servers.append(server)
        return path

    yield start
    for s in servers:
        await s.stop(0)


def _pod(i: int, devices: int) -> pb.PodResources:
    ids = [f"GPU-{i:06d}-{k:04d}-0000-0000-000000000000" for k in range(devices)]
    return pb.PodResources(name=f"pod-{i}", namespace="ml", containers=[pb.ContainerResources(
        name="main", devices=[pb.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=ids)])])


async def test_a_list_larger_than_grpcs_default_limit_arrives_whole(serve: Serve) -> None:
    """500 pods x 250 device IDs of 42 characters: about 5.5 MB, past gRPC's 4 MiB default."""
    path = await serve(Kubelet(pods=[_pod(i, 250) for i in range(500)]))
    client = PodResourcesClient(path, timeout=10.0)
    got = await client.list()
    assert len(got) == 500 and all(len(c.device_ids) == 250 for c in got)
    assert got[499].pod == "pod-499" and got[499].device_ids[-1] == "GPU-000499-0249-0000-0000-000000000000"
    size = len(pb.ListPodResourcesResponse(pod_resources=[_pod(i, 250) for i in range(500)]).SerializeToString())
    assert size > 4 << 20


async def test_a_reply_past_the_receive_limit_is_refused(serve: Serve) -> None:
    path = await serve(Kubelet(pods=[_pod(i, 10) for i in range(100)]))
    with pytest.raises(GrpcError) as err:
        await unary_call(path, METHOD_LIST, request=b"", timeout=5.0, max_receive_bytes=1000)
    assert err.value.code == RESOURCE_EXHAUSTED


async def test_the_kubelets_rate_limit_means_back_off(serve: Serve) -> None:
    path = await serve(Kubelet(abort=(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")))
    with pytest.raises(PeerRateLimited, match="rejected by rate limit"):
        await PodResourcesClient(path, timeout=5.0).list()


async def test_an_old_kubelet_without_allocatable_answers_none(serve: Serve) -> None:
    path = await serve(Kubelet())
    assert await PodResourcesClient(path, timeout=5.0).allocatable() is None
    path2 = await serve(Kubelet(allocatable=[pb.ContainerDevices(resource_name="nvidia.com/gpu",
                                                                  device_ids=["GPU-a", "GPU-b"])]))
    assert path2 == path  # the newest server owns the socket now
    assert await PodResourcesClient(path, timeout=5.0).allocatable() == {"nvidia.com/gpu": ("GPU-a", "GPU-b")}


async def test_other_errors_are_bad_responses_with_the_peers_words(serve: Serve) -> None:
    path = await serve(Kubelet(abort=(grpc.StatusCode.PERMISSION_DENIED, "not allowed: ünïcode")))
    with pytest.raises(PeerBadResponse, match="PERMISSION_DENIED: not allowed: ünïcode"):
        await PodResourcesClient(path, timeout=5.0).list()


async def test_a_hanging_kubelet_is_unavailable_after_the_timeout(serve: Serve) -> None:
    path = await serve(Kubelet(delay=5.0))
    with pytest.raises(PeerUnavailable, match="DEADLINE_EXCEEDED"):
        await PodResourcesClient(path, timeout=0.3).list()


async def test_a_restarted_kubelet_is_found_on_its_new_socket(serve: Serve, tmp_path: Path) -> None:
    """Socket gone: unavailable; a stale socket file nobody listens on: unavailable; recreated: answers."""
    path = tmp_path / "kubelet.sock"
    client = PodResourcesClient(path, timeout=2.0)
    with pytest.raises(PeerUnavailable, match="does not exist"):
        await client.list()
    import socket

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody accepts
    with pytest.raises(PeerUnavailable, match="UNAVAILABLE"):
        await client.list()
    path.unlink()
    await serve(Kubelet(pods=[_pod(1, 2)]))
    assert [c.pod for c in await client.list()] == ["pod-1"]


async def test_a_peer_that_is_not_grpc_is_unavailable(tmp_path: Path) -> None:
    """Something on the socket that closes the connection at once (not HTTP/2)."""
    path = tmp_path / "other.sock"

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_unix_server(hang_up, str(path))
    try:
        with pytest.raises(GrpcError, match="UNAVAILABLE"):
            await unary_call(path, METHOD_LIST, request=b"", timeout=2.0, max_receive_bytes=1 << 20)
    finally:
        server.close()
        await server.wait_closed()


def test_the_agent_does_not_load_the_grpc_runtime() -> None:
    """What keeps the agent under 60 MB (bench: ``--only agent``): the gRPC C core stays out of its process."""
    import subprocess
    import sys

    code = ("import sys, exporter.agent.service, exporter.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith('grpc')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _claim_resource(device: str, *cdi: str, share_id: str | None = None) -> pb.ClaimResource:
    res = pb.ClaimResource(driver_name="gpu.nvidia.com", pool_name="node-a", device_name=device,
                           cdi_devices=[pb.CDIDevice(name=c) for c in cdi])
    if share_id is not None:
        res.share_id = share_id
    return res


async def test_list_reads_dynamic_resources_per_claim_and_device(serve: Serve) -> None:
    """The kubelet's DRA answer (reference example): a container with no plugin devices and a claim of two
    devices whose CDI names accumulate; a second claim with a shareID and no claim_namespace (the pod's
    namespace then). Devices are (driver, pool, device, share_id); CDI names are not carried."""
    cdi0 = "k8s.gpu.nvidia.com/claim=5d1c7a3e-gpu-0"
    cdi1 = "k8s.gpu.nvidia.com/claim=5d1c7a3e-gpu-1"
    pod = pb.PodResources(name="trainer-0", namespace="ml", containers=[pb.ContainerResources(
        name="main", dynamic_resources=[
            pb.DynamicResource(claim_name="trainer-0-gpu-x7k2p", claim_namespace="ml",
                               claim_resources=[_claim_resource("gpu-0", cdi0), _claim_resource("gpu-1", cdi0, cdi1)]),
            pb.DynamicResource(claim_name="share", claim_resources=[_claim_resource("gpu-2", share_id="s-1")])])])
    client = PodResourcesClient(await serve(Kubelet(pods=[pod])), timeout=5.0)
    assert await client.list() == []  # no device-plugin devices
    nv = "gpu.nvidia.com"
    assert client.last_claims == [
        ContainerClaim("ml", "trainer-0", "main", "ml", "trainer-0-gpu-x7k2p",
                       (ClaimDevice(nv, "node-a", "gpu-0"), ClaimDevice(nv, "node-a", "gpu-1"))),
        ContainerClaim("ml", "trainer-0", "main", "ml", "share", (ClaimDevice(nv, "node-a", "gpu-2", "s-1"),)),
    ]
