"""The aggregator's guard from its settings: the API server's reviews when ``GPUCOST_AUTH=kubernetes`` (and
an OIDC issuer's ID tokens when ``GPUCOST_OIDC_ISSUER`` is set), nothing asked otherwise; the clients it makes
are closed with the HTTP application."""

from __future__ import annotations

from aiohttp import web

from exporter.aggregator.web.access.gate import Access, Guard, Reviewer
from exporter.aggregator.web.access.oidc import OidcOrKube, OidcSettings, OidcVerifier
from exporter.aggregator.web.access.reviews import KubeReviewer
from exporter.aggregator.web.view import AggregatorView
from exporter.clients.kube import make_api_client


def guard_for(agg: AggregatorView, app: web.Application) -> Guard:
    """The guard of ``app``; a caller's namespaces are checked among those the aggregator's watch has now."""
    settings = agg.settings
    if settings.auth != "kubernetes":
        return Guard(None)
    kube = KubeReviewer(lambda: make_api_client(settings.kubeconfig), timeout=settings.auth_review_timeout)
    reviewer: Reviewer = kube
    oidc: OidcVerifier | None = None
    if settings.oidc_issuer:
        if not settings.oidc_audience:
            raise ValueError("GPUCOST_OIDC_ISSUER needs GPUCOST_OIDC_AUDIENCE (the aud its ID tokens carry)")
        oidc = OidcVerifier(OidcSettings(settings.oidc_issuer, settings.oidc_audience,
                                         username_claim=settings.oidc_username_claim,
                                         groups_claim=settings.oidc_groups_claim,
                                         timeout=settings.auth_review_timeout))
        reviewer = OidcOrKube(oidc, kube)

    async def close(_app: web.Application) -> None:
        await kube.close()
        if oidc is not None:
            await oidc.close()
    app.on_cleanup.append(close)
    return Guard(Access(reviewer, ttl=settings.auth_cache_ttl, namespaces=lambda: agg.kube.namespaces))
