"""The middleware every aggregator route passes: who calls (401), what RBAC lets it see (403, or a narrower
``Scope``), 503 when the API server cannot say; and ``gpucost_http_requests_total{route,code}``.

Reviews are cached ``ttl`` seconds: a token by its SHA-256 (the token itself is never kept or logged), a
decision by the identity and the question. Without auth (``GPUCOST_AUTH`` unset) every caller sees
everything, as before; the requests are counted all the same.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client.core import CounterMetricFamily

from exporter.aggregator.web.access.cache import TtlCache
from exporter.aggregator.web.access.reviews import Ask, Identity, ReviewUnavailable
from exporter.aggregator.web.access.scope import EVERYTHING, Scope
from exporter.logs import get_logger

log = get_logger("access")
SCOPE = web.RequestKey("gpucost_scope", Scope)
#: Probes (no cost data, and the kubelet has no token) and the API's contract (routes and shapes, no data).
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/api/v1/openapi.json"})
NAMESPACE_CHECKS = 16  # access reviews in flight at once for one caller's namespaces


class Reviewer(Protocol):
    """Who answers reviews: the API server (``KubeReviewer``), or an OIDC issuer's keys for authentication."""

    async def authenticate(self, token: str) -> Identity | None:
        """The token's identity; None when it is not a valid token."""

    async def allowed(self, who: Identity, ask: Ask) -> bool:
        """Whether RBAC lets ``who`` do ``ask``."""


class Forbidden(Exception):
    """Authenticated, but allowed nothing the route asks."""


class Access:
    """Authentication and authorisation with their caches and counters; ``namespaces`` lists the namespaces a
    caller's access is checked in (those the API server has now)."""

    def __init__(self, reviewer: Reviewer, *, ttl: float, namespaces: Callable[[], Iterable[str]]) -> None:
        self.reviewer = reviewer
        self.namespaces = namespaces
        self.tokens: TtlCache[str, Identity | None] = TtlCache(ttl)
        self.decisions: TtlCache[tuple[Identity, Ask], bool] = TtlCache(ttl)
        self.reviews: Counter[tuple[str, str]] = Counter()  # (review, result): API calls actually made

    async def identify(self, token: str) -> Identity | None:
        """The token's identity (None: not authenticated), reviewed at most once per ``ttl``."""
        async def review() -> Identity | None:
            try:
                who = await self.reviewer.authenticate(token)
            except ReviewUnavailable:
                self.reviews["token", "error"] += 1
                raise
            self.reviews["token", "authenticated" if who else "rejected"] += 1
            return who
        return await self.tokens.get(hashlib.sha256(token.encode()).hexdigest(), review)

    async def may(self, who: Identity, ask: Ask) -> bool:
        """RBAC's cached answer for ``who`` on ``ask``."""
        async def review() -> bool:
            try:
                ok = await self.reviewer.allowed(who, ask)
            except ReviewUnavailable:
                self.reviews["access", "error"] += 1
                raise
            self.reviews["access", "allowed" if ok else "denied"] += 1
            return ok
        return await self.decisions.get((who, ask), review)

    async def scope(self, who: Identity, *, metrics: bool, namespace: str | None = None) -> Scope:
        """What ``who`` sees on a route: /metrics (``metrics``), one namespace (the KEDA endpoint names one), or
        cluster-wide, else the namespaces it may get costs in. Forbidden when that is nothing."""
        if metrics:
            if await self.may(who, Ask(metrics=True)):
                return EVERYTHING
            raise Forbidden(f"{who.user} may not get /metrics")
        if await self.may(who, Ask("")):
            return EVERYTHING
        candidates = sorted({namespace} if namespace else set(self.namespaces()))
        gate = asyncio.Semaphore(NAMESPACE_CHECKS)

        async def check(ns: str) -> bool:
            async with gate:
                return await self.may(who, Ask(ns))
        answers = await asyncio.gather(*(check(ns) for ns in candidates))
        allowed = frozenset(ns for ns, ok in zip(candidates, answers, strict=True) if ok)
        if not allowed:
            raise Forbidden(f"{who.user} may not get costs in any namespace asked")
        return Scope(namespaces=allowed)

    def families(self) -> list[CounterMetricFamily]:
        """The review counters, for /metrics."""
        fam = CounterMetricFamily("gpucost_auth_reviews", "TokenReviews and SubjectAccessReviews asked of the "
                                  "API server (not the cached answers), by result", labels=["review", "result"])
        for (review, result), n in sorted(self.reviews.items()):
            fam.add_metric([review, result], n)
        return [fam]


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header; None when there is none."""
    if not header or not header.startswith("Bearer "):
        return None
    return header[len("Bearer "):].strip() or None


def route_of(req: web.Request) -> str:
    """The matched route's path (bounded label values); ``other`` for paths no route serves."""
    info = req.match_info.route.resource
    return info.canonical if info is not None else "other"


class Guard:
    """The middleware: counts every request; with ``access``, admits only what RBAC allows."""

    def __init__(self, access: Access | None) -> None:
        self.access = access
        self.requests: Counter[tuple[str, str]] = Counter()  # (route, code)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Decide, hand the route its ``Scope`` (``req[SCOPE]``), count the answer's code."""
        status = 500
        try:
            resp = await self._guarded(request, handler)
            status = resp.status
            return resp
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.requests[route_of(request), str(status)] += 1

    async def _guarded(self, req: web.Request, handler: Handler) -> web.StreamResponse:
        if self.access is None or req.path in OPEN_PATHS:
            req[SCOPE] = EVERYTHING
            return await handler(req)
        token = bearer(req.headers.get("Authorization"))
        challenge = {"WWW-Authenticate": 'Bearer realm="gpu-cost-exporter"'}
        if token is None:
            return _error(401, "a bearer token is required", **challenge)
        try:
            who = await self.access.identify(token)
            if who is None:
                return _error(401, "the bearer token was not accepted", **challenge)
            req[SCOPE] = await self.access.scope(who, metrics=req.path == "/metrics",
                                                 namespace=req.query.get("namespace") if
                                                 req.path == "/api/v1/keda/utilization" else None)
        except ReviewUnavailable as exc:
            log.warning("review_unavailable", route=route_of(req), reason=str(exc))
            return _error(503, "access cannot be checked now: the Kubernetes API did not answer",
                          **{"Retry-After": "5"})
        except Forbidden as exc:
            return _error(403, str(exc))
        return await handler(req)

    def families(self) -> list[CounterMetricFamily]:
        """``gpucost_http_requests_total{route,code}``, then the review counters when auth is on."""
        fam = CounterMetricFamily("gpucost_http_requests", "HTTP requests answered, by route and status code",
                                  labels=["route", "code"])
        for (route, code), n in sorted(self.requests.items()):
            fam.add_metric([route, code], n)
        return [fam, *(self.access.families() if self.access else [])]
