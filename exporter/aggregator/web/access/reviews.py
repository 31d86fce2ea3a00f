"""TokenReview and SubjectAccessReview through the aggregator's Kubernetes client (kubernetes_asyncio).

A review the API server does not answer (unreachable, timeout, an error status, a body that is not a
review) raises ``ReviewUnavailable``: the caller answers 503, never lets the request through. Tokens are
sent in the review's body only, and never logged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

COST_GROUP = "gpu-cost-exporter.io"
COST_RESOURCE = "costs"
METRICS_PATH = "/metrics"


class ReviewUnavailable(Exception):
    """The API server could not answer a review; the message names why (never the token)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a token belongs to, as TokenReview (or an OIDC issuer) says."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())  # hashable: the decision cache's key


@dataclass(frozen=True, slots=True)
class Ask:
    """One question for RBAC: ``get`` costs in ``namespace`` ("" = cluster-wide), or ``get`` ``/metrics``."""

    namespace: str = ""
    metrics: bool = False

    def attributes(self) -> dict[str, Any]:
        """The SubjectAccessReview's resource or non-resource attributes."""
        if self.metrics:
            return {"nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"}}
        return {"resourceAttributes": {"namespace": self.namespace, "verb": "get", "group": COST_GROUP,
                                       "resource": COST_RESOURCE}}


class KubeReviewer:
    """Asks the API server; ``client`` makes (once) the ApiClient, from the kubeconfig or in-cluster."""

    def __init__(self, client: Callable[[], Awaitable[Any]], *, timeout: float) -> None:
        self._make_client = client
        self._client: Any = None
        self._lock = asyncio.Lock()
        self.timeout = timeout

    async def _api(self) -> Any:
        async with self._lock:
            if self._client is None:
                try:
                    self._client = await self._make_client()
                except Exception as exc:  # no kubeconfig, not in a cluster: no review can be answered
                    raise ReviewUnavailable(f"no Kubernetes client: {type(exc).__name__}") from None
            return self._client

    async def close(self) -> None:
        """Close the client, if one was made."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _create(self, api_class: str, *, method: str, body: dict[str, Any]) -> dict[str, Any]:
        from kubernetes_asyncio import client

        api = getattr(client, api_class)(await self._api())
        try:
            resp = await getattr(api, method)(body, _preload_content=False, _request_timeout=self.timeout)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ReviewUnavailable(f"{body['kind']}: API server unreachable ({type(exc).__name__})") from None
        except client.ApiException as exc:
            raise ReviewUnavailable(f"{body['kind']}: HTTP {exc.status}") from None
        try:
            if resp.status not in (200, 201):
                raise ReviewUnavailable(f"{body['kind']}: HTTP {resp.status}")
            doc = json.loads(await resp.read())
        except ValueError:
            raise ReviewUnavailable(f"{body['kind']}: not JSON") from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ReviewUnavailable(f"{body['kind']}: answer dropped ({type(exc).__name__})") from None
        finally:
            resp.release()
        status = doc.get("status") if isinstance(doc, dict) else None
        if not isinstance(status, dict):
            raise ReviewUnavailable(f"{body['kind']}: no status in the answer")
        return status

    async def authenticate(self, token: str) -> Identity | None:
        """The token's identity, or None when the API server says it is not authenticated."""
        status = await self._create("AuthenticationV1Api", method="create_token_review", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        if status.get("authenticated") is not True:
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {} if isinstance(user, dict) else None
        if not isinstance(user, dict) or not isinstance(extra, dict) or not isinstance(user.get("groups") or [], list) \
                or not all(isinstance(v, list) for v in extra.values()):
            raise ReviewUnavailable("TokenReview: an authenticated user of an unexpected shape")  # 503, never 500
        return Identity(user=str(user.get("username", "")), groups=tuple(str(g) for g in user.get("groups") or ()),
                        uid=str(user.get("uid", "")),
                        extra=tuple(sorted((str(k), tuple(str(x) for x in v)) for k, v in extra.items())))

    async def allowed(self, who: Identity, ask: Ask) -> bool:
        """RBAC's answer for ``who`` (its user, groups, uid and extra, as authenticated) on ``ask``."""
        spec: dict[str, Any] = {"user": who.user, "groups": list(who.groups), **ask.attributes()}
        if who.uid:
            spec["uid"] = who.uid
        if who.extra:
            spec["extra"] = {k: list(v) for k, v in who.extra}
        status = await self._create("AuthorizationV1Api", method="create_subject_access_review", body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        return status.get("allowed") is True
