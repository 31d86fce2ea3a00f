"""The agent's HTTP endpoints: /metrics, /v1/usage, /healthz, /readyz."""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from exporter.secrets import SecretFile


class UsageServer(Protocol):
    """What the endpoints need of the agent (so this module never imports the daemon)."""

    usage_token: SecretFile | None
    published_json: bytes | None

    def acknowledge(self, ts: float) -> None:
        """Record that the aggregator booked everything up to ``ts``."""

    def health_report(self) -> dict[str, Any]:
        """The /readyz body: status, the reasons it is degraded, peer health."""


def build_app(agent: UsageServer, registry: CollectorRegistry, *, max_request_bytes: int) -> web.Application:
    """The agent's aiohttp app; bodies beyond ``max_request_bytes`` are refused."""
    app = web.Application(client_max_size=max_request_bytes)

    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def usage(request: web.Request) -> web.Response:
        if agent.usage_token is not None and not agent.usage_token.matches_bearer(
                request.headers.get("Authorization")):
            return web.json_response({"error": "unauthorized"}, status=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        body = agent.published_json
        if body is None:
            return web.json_response({"error": "no tick has completed yet"}, status=503)
        ack = request.query.get("ack")
        # An ack lets the agent forget counters: honoured only when the request proved the token.
        if ack is not None and agent.usage_token is not None:
            try:
                value = float(ack)
            except ValueError:
                return web.json_response({"error": "ack must be a number"}, status=400)
            if not math.isfinite(value):
                return web.json_response({"error": "ack must be finite"}, status=400)
            agent.acknowledge(value)
        return web.Response(body=body, content_type="application/json")

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text=json.dumps(agent.health_report()), content_type="application/json")

    async def readyz(_request: web.Request) -> web.Response:
        report = agent.health_report()
        return web.Response(text=json.dumps(report), content_type="application/json",
                            status=200 if report["status"] == "ok" else 503)

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/usage", usage)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
