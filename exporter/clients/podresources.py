"""kubelet pod-resources v1 client over the node's unix socket (grpc.aio).

The kubelet rate-limits this socket with one token bucket (100 req/s, burst 10) shared by every
client on the node; ``RESOURCE_EXHAUSTED`` therefore means "back off", not "fail". Responses on busy
nodes exceed gRPC's default 4 MiB receive limit, so the limit is raised. The kubelet deletes and
recreates the socket when it restarts: on ``UNAVAILABLE`` the channel is dropped and rebuilt.
DRA allocations (``dynamic_resources``) are read too, keyed on (driver, pool, device): the kubelet's
CDI list repeats earlier devices' names under later ones, so it identifies nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from exporter.clients.errors import PeerBadResponse, PeerRateLimited, PeerUnavailable
from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.clients.proto import podresources_v1_pb2_grpc as pb_grpc

MAX_RECEIVE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """Devices of one resource held by one container."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One device of a DRA claim, as the kubelet names it."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerClaim:
    """A DRA claim one container names, with every device of the claim (the kubelet does not filter)."""

    namespace: str
    pod: str
    container: str
    claim_namespace: str
    claim_name: str
    devices: tuple[ClaimDevice, ...]


class TokenBucket:
    """Client-side limiter so this agent never eats the node's shared kubelet budget."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class PodResourcesClient:
    """List / GetAllocatableResources against one kubelet socket."""

    def __init__(self, socket_path: Path, timeout: float, rate: float = 10.0, burst: int = 5) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.PodResourcesListerStub | None = None
        self._bucket = TokenBucket(rate, burst)
        self.last_claims: list[ContainerClaim] = []  # DRA claims of the last successful List

    def _get_stub(self) -> pb_grpc.PodResourcesListerStub:
        if not self.socket_path.exists():
            raise PeerUnavailable(f"pod-resources socket {self.socket_path} does not exist")
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(
                f"unix://{self.socket_path}",
                options=[
                    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                    ("grpc.enable_retries", 0),
                ],
            )
            self._stub = pb_grpc.PodResourcesListerStub(self._channel)
        return self._stub

    async def _reset(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close()

    async def _call(self, method: str, request: object) -> object:
        if not self._bucket.take():
            raise PeerRateLimited("client-side pod-resources budget exhausted")
        stub = self._get_stub()
        try:
            return await getattr(stub, method)(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise PeerRateLimited(f"kubelet rate limit: {exc.details()}") from exc
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                await self._reset()
                raise PeerUnavailable(f"pod-resources {method}: {code.name}: {exc.details()}") from exc
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise
            raise PeerBadResponse(f"pod-resources {method}: {code.name}: {exc.details()}") from exc

    async def list(self) -> list[ContainerDevices]:
        """Every (pod, container, resource) with device IDs, from ``List``."""
        resp = await self._call("List", pb.ListPodResourcesRequest())
        out: list[ContainerDevices] = []
        claims: list[ContainerClaim] = []
        for pod in resp.pod_resources:  # type: ignore[attr-defined]
            for ctr in pod.containers:
                for dev in ctr.devices:
                    if dev.device_ids:
                        out.append(ContainerDevices(pod.namespace, pod.name, ctr.name, dev.resource_name,
                                                    tuple(dev.device_ids)))
                for dyn in ctr.dynamic_resources:
                    devices = tuple(ClaimDevice(r.driver_name, r.pool_name, r.device_name,
                                                r.share_id if r.HasField("share_id") else None)
                                    for r in dyn.claim_resources)
                    claims.append(ContainerClaim(pod.namespace, pod.name, ctr.name,
                                                 dyn.claim_namespace or pod.namespace, dyn.claim_name, devices))
        self.last_claims = claims
        return out

    async def allocatable(self) -> dict[str, tuple[str, ...]] | None:
        """resource -> device IDs the node can allocate; None when the kubelet does not implement it."""
        try:
            resp = await self._call("GetAllocatableResources", pb.AllocatableResourcesRequest())
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise PeerBadResponse(f"GetAllocatableResources: {exc.code().name}") from exc
        out: dict[str, list[str]] = {}
        for dev in resp.devices:  # type: ignore[attr-defined]
            out.setdefault(dev.resource_name, []).extend(dev.device_ids)
        return {k: tuple(v) for k, v in out.items()}

    async def close(self) -> None:
        await self._reset()
