"""An exporter's /metrics on loopback for agent tests: a real HTTP peer serving whatever text the test gives."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from exporter.sim.runner import free_port


async def serve_metrics(body: Callable[[], str]) -> tuple[web.AppRunner, str]:
    """GET /metrics answers ``body()`` on every scrape; returns the runner (the caller cleans it up) and the URL."""

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=body())

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/metrics"
