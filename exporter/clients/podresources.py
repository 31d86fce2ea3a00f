"""kubelet pod-resources v1 client over the node's unix socket (unary gRPC calls, ``grpc_unary``).

The kubelet rate-limits this socket with one token bucket (100 req/s, burst 10) shared by every
client on the node; ``RESOURCE_EXHAUSTED`` therefore means "back off", not "fail". Responses on busy
nodes exceed gRPC's default 4 MiB receive limit, so the limit is raised. The kubelet deletes and
recreates the socket when it restarts: each call connects anew, so nothing needs rebuilding.
DRA allocations (``dynamic_resources``) are read too, keyed on (driver, pool, device): the kubelet's
CDI list repeats earlier devices' names under later ones, so it identifies nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from exporter.clients.errors import PeerBadResponse, PeerRateLimited, PeerUnavailable
from exporter.clients.grpc_unary import (
    DEADLINE_EXCEEDED,
    RESOURCE_EXHAUSTED,
    UNAVAILABLE,
    UNIMPLEMENTED,
    GrpcError,
    unary_call,
)
from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.model.pod_resources import ClaimDevice, ContainerClaim, ContainerDevices

MAX_RECEIVE_BYTES = 64 << 20
M = TypeVar("M", bound=Message)


class TokenBucket:
    """Client-side limiter so this agent never eats the node's shared kubelet budget."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> bool:
        """Spend a token if one is left; False: the call is refused as rate-limited."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class PodResourcesClient:
    """List / GetAllocatableResources against one kubelet socket."""

    def __init__(self, socket_path: Path, timeout: float, *, rate: float = 10.0, burst: int = 5) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._bucket = TokenBucket(rate, burst)
        self.last_claims: list[ContainerClaim] = []  # DRA claims of the last successful List

    async def _call(self, method: str, request: Message, *, reply: type[M]) -> M:
        """``UNIMPLEMENTED`` is raised as the :class:`GrpcError` itself (callers decide what it means)."""
        if not self._bucket.take():
            raise PeerRateLimited("client-side pod-resources budget exhausted")
        try:
            self.socket_path.stat()  # Path.exists() raises on a folder it may not search (root's 0750)
        except FileNotFoundError:
            raise PeerUnavailable(f"pod-resources socket {self.socket_path} does not exist") from None
        except OSError as exc:  # EACCES: the agent is not the socket's owner (docs/install.md)
            raise PeerUnavailable(f"pod-resources socket {self.socket_path}: {exc.strerror or exc}") from None
        try:
            data = await unary_call(self.socket_path, f"/v1.PodResourcesLister/{method}",
                                    request=request.SerializeToString(),
                                    timeout=self.timeout, max_receive_bytes=MAX_RECEIVE_BYTES)
        except GrpcError as exc:
            if exc.code == RESOURCE_EXHAUSTED:
                raise PeerRateLimited(f"kubelet rate limit: {exc.details}") from exc
            if exc.code in (UNAVAILABLE, DEADLINE_EXCEEDED):
                raise PeerUnavailable(f"pod-resources {method}: {exc.name}: {exc.details}") from exc
            if exc.code == UNIMPLEMENTED:
                raise
            raise PeerBadResponse(f"pod-resources {method}: {exc.name}: {exc.details}") from exc
        try:
            return reply.FromString(data)
        except DecodeError as exc:
            raise PeerBadResponse(f"pod-resources {method}: undecodable reply: {exc}") from exc

    async def list(self) -> list[ContainerDevices]:
        """Every (pod, container, resource) with device IDs, from ``List``."""
        resp = await self._call("List", pb.ListPodResourcesRequest(), reply=pb.ListPodResourcesResponse)
        out: list[ContainerDevices] = []
        claims: list[ContainerClaim] = []
        for pod in resp.pod_resources:
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
            resp = await self._call("GetAllocatableResources", pb.AllocatableResourcesRequest(),
                                    reply=pb.AllocatableResourcesResponse)
        except GrpcError as exc:  # only UNIMPLEMENTED reaches here
            if exc.code == UNIMPLEMENTED:
                return None
            raise PeerBadResponse(f"GetAllocatableResources: {exc.name}") from exc
        out: dict[str, list[str]] = {}
        for dev in resp.devices:
            out.setdefault(dev.resource_name, []).extend(dev.device_ids)
        return {k: tuple(v) for k, v in out.items()}

    async def close(self) -> None:
        """Nothing is held between calls; kept so owners close every client alike."""
