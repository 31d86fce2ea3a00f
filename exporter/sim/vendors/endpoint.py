"""HAMi's vGPU monitor endpoint for one simulated node (port 9394 in a real cluster)."""

from __future__ import annotations

from aiohttp import web

from exporter.sim.peers import DcgmEndpoint


class HamiMonitorEndpoint(DcgmEndpoint):
    """Serves the node's HAMi monitor ``/metrics``; up and down like the DCGM endpoint it extends."""

    async def metrics(self, req: web.Request) -> web.Response:
        """``/metrics``: every HAMi container's utilisation now."""
        if self._site is None:
            raise web.HTTPServiceUnavailable()
        return web.Response(text=self.cluster.render_hami(self.node), content_type="text/plain", charset="utf-8")
