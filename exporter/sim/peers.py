"""Per-node peers: a DCGM Exporter HTTP endpoint and a kubelet pod-resources gRPC server on a unix socket.

Both can be taken down and brought back (``dcgm_down``, ``podresources_down``): a down DCGM endpoint
really refuses connections (its listening socket is closed), and a down kubelet really removes its
socket file, as a kubelet restart does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import grpc
from aiohttp import web

from exporter.clients.proto import podresources_v1_pb2 as pb
from exporter.clients.proto import podresources_v1_pb2_grpc as pb_grpc
from exporter.sim.cluster import SimCluster
from exporter.sim.dra_objects import DRIVER, cdi_name, share_id
from exporter.sim.kubelet_answers import PodDevices


class DcgmEndpoint:
    """Serves ``/metrics`` in DCGM Exporter's format for one node."""

    def __init__(self, cluster: SimCluster, node: str, *, host: str, port: int,
                 before_render: Callable[[], None] | None = None) -> None:
        self.cluster, self.node, self.host, self.port = cluster, node, host, port
        self.before_render = before_render
        self.scrapes = 0
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        self._runner = web.AppRunner(app, access_log=None)
        self._site: web.TCPSite | None = None

    @property
    def url(self) -> str:
        """The ``/metrics`` URL agents scrape."""
        return f"http://{self.host}:{self.port}/metrics"

    async def metrics(self, req: web.Request) -> web.Response:
        """``/metrics``: the node's DCGM text now; while down, 503 and kept-alive connections dropped."""
        if self._site is None:
            # Down: kill connections that were kept alive from before, as a dead exporter would.
            if req.transport is not None:
                req.transport.close()
            raise web.HTTPServiceUnavailable()
        if self.before_render is not None:
            self.before_render()
        self.scrapes += 1
        return web.Response(text=self.cluster.render_dcgm(self.node), content_type="text/plain",
                            charset="utf-8")

    async def health(self, _req: web.Request) -> web.Response:
        """``/health``: OK while listening, KO while the endpoint is down."""
        return web.Response(text="KO" if self._site is None else "OK")

    async def start(self) -> None:
        """Listen (again, after a ``dcgm_down`` window); does nothing while already up."""
        if not self._runner.server:
            await self._runner.setup()
        if self._site is None:
            self._site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
            await self._site.start()

    async def stop_listening(self) -> None:
        """Stop accepting connections, as a dead exporter would; ``start`` brings it back."""
        if self._site is not None:
            await self._site.stop()
            self._site = None

    @property
    def up(self) -> bool:
        """Whether the endpoint is listening."""
        return self._site is not None

    async def close(self) -> None:
        """Stop listening and free the server for good."""
        await self.stop_listening()
        await self._runner.cleanup()


class _Servicer(pb_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    """Method names are the gRPC service's (List, GetAllocatableResources, Get), hence CamelCase."""

    def __init__(self, owner: PodResourcesServer) -> None:
        self.owner = owner

    def _pod(self, a: PodDevices) -> pb.PodResources:
        """One pod as the kubelet reports it: device-plugin IDs, or DRA claims under dynamic_resources."""
        p = a.pod
        ctr = pb.ContainerResources(name=p.container, cpu_ids=[])
        if a.devices:
            ctr.devices.append(pb.ContainerDevices(resource_name=p.resource, device_ids=a.devices))
        cdi: list[pb.CDIDevice] = []
        for claim in p.claims:
            dyn = ctr.dynamic_resources.add(claim_name=claim.name, claim_namespace=p.namespace)
            for device in claim.devices:
                # As the kubelet does: CDI names accumulate, so later devices also carry earlier devices' names.
                cdi.append(pb.CDIDevice(name=cdi_name(p.namespace, claim.name, device=device)))
                res = dyn.claim_resources.add(driver_name=DRIVER, pool_name=self.owner.node, device_name=device,
                                              cdi_devices=list(cdi))
                if claim.memory_mib is not None:  # a consumable-capacity share: its shareID (kubelet 1.35)
                    res.share_id = share_id(p.namespace, claim.name, device=device)
        return pb.PodResources(name=p.name, namespace=p.namespace, containers=[ctr])

    async def List(self, request: pb.ListPodResourcesRequest, context: object) -> pb.ListPodResourcesResponse:
        self.owner.calls += 1
        if self.owner.before_call is not None:
            self.owner.before_call()
        cluster = self.owner.cluster
        return pb.ListPodResourcesResponse(pod_resources=[
            self._pod(a) for a in cluster.pod_resources(self.owner.node)])

    async def GetAllocatableResources(self, request: pb.AllocatableResourcesRequest,
                                      context: object) -> pb.AllocatableResourcesResponse:
        self.owner.calls += 1
        layout = self.owner.cluster.layouts[self.owner.node]
        return pb.AllocatableResourcesResponse(devices=[
            pb.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in sorted(layout.resources.items())])

    async def Get(self, request: pb.GetPodResourcesRequest,
                  context: grpc.aio.ServicerContext) -> pb.GetPodResourcesResponse:
        self.owner.calls += 1
        for a in self.owner.cluster.pod_resources(self.owner.node):
            if a.pod.name == request.pod_name and a.pod.namespace == request.pod_namespace:
                return pb.GetPodResourcesResponse(pod_resources=self._pod(a))
        await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_namespace}/{request.pod_name} not found")
        raise AssertionError("unreachable")


class PodResourcesServer:
    """A grpc.aio server for one node's kubelet socket."""

    def __init__(self, cluster: SimCluster, node: str, *, socket_path: Path,
                 before_call: Callable[[], None] | None = None) -> None:
        self.cluster, self.node, self.socket_path = cluster, node, socket_path
        self.before_call = before_call
        self.calls = 0
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Serve the kubelet PodResources API on the unix socket, replacing a stale socket file."""
        if self._server is not None:
            return
        # As the kubelet makes them (MkdirAll 0750, then net.Listen with its umask 022, no chmod, no chown):
        # run as root, the folder is root:root 0750 and the socket root:root 0755 -- connecting needs write
        # permission on the socket, so only its owner (or a capability) can.
        self.socket_path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        server = grpc.aio.server()
        pb_grpc.add_PodResourcesListerServicer_to_server(_Servicer(self), server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self.socket_path.chmod(0o755)
        self._server = server

    async def stop(self) -> None:
        """Stop serving and remove the socket, as a kubelet outage looks to the agent."""
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    @property
    def up(self) -> bool:
        """Whether the socket is being served."""
        return self._server is not None
