"""The aggregator's guard from its settings: the API server's reviews when ``GPUCOST_AUTH=kubernetes``,
nothing asked otherwise; the client it makes is closed with the HTTP application."""

from __future__ import annotations

from aiohttp import web

from exporter.aggregator.access.gate import Access, Guard
from exporter.aggregator.access.reviews import KubeReviewer
from exporter.aggregator.view import AggregatorView
from exporter.clients.kube import make_api_client


def guard_for(agg: AggregatorView, app: web.Application) -> Guard:
    """The guard of ``app``; a caller's namespaces are checked among those the aggregator's watch has now."""
    settings = agg.settings
    if settings.auth != "kubernetes":
        return Guard(None)
    reviewer = KubeReviewer(lambda: make_api_client(settings.kubeconfig), timeout=settings.auth_review_timeout)

    async def close(_app: web.Application) -> None:
        await reviewer.close()
    app.on_cleanup.append(close)
    return Guard(Access(reviewer, ttl=settings.auth_cache_ttl, namespaces=lambda: agg.kube.namespaces))
