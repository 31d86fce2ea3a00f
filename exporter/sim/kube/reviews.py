"""The simulated API server's TokenReview and SubjectAccessReview, decided from the scenario's ``users``.

Request and response shapes are those of ``authentication.k8s.io/v1`` and ``authorization.k8s.io/v1``: the
aggregator's real client posts to these routes exactly as it would to a cluster's API server. A token not
listed is not authenticated; RBAC is modelled as SCENARIO.md says: ``namespaces`` may ``get`` costs there,
``cluster`` everywhere, ``metrics`` the non-resource URL ``/metrics``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aiohttp import web

from exporter.sim.scenario_ctx import Ctx
from exporter.sim.users import COST_GROUP, COST_RESOURCE, UserSpec

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def parse_users(ctx: Ctx, raw: object) -> list[UserSpec]:
    """The scenario's ``users:`` list, validated (unique names and tokens)."""
    users: list[UserSpec] = []
    for i, u in enumerate(ctx.seq(raw, "users")):
        where = f"users[{i}]"
        u = ctx.mapping(u, where)
        ctx.known_keys(u, {"name", "token", "groups", "namespaces", "cluster", "service_account", "metrics"},
                       where=where)
        name, token = ctx.string(u.get("name"), f"{where}.name"), ctx.string(u.get("token"), f"{where}.token")
        if any(x.name == name for x in users) or any(x.token == token for x in users):
            raise ctx.fail(where, f"duplicate user name or token ({name!r})")
        sa = ctx.string(u.get("service_account", ""), f"{where}.service_account") if u.get("service_account") else ""
        if sa and sa.count("/") != 1:
            raise ctx.fail(f"{where}.service_account", f"expected <namespace>/<name>, got {sa!r}")
        flags = {k: u.get(k, False) for k in ("cluster", "metrics")}
        for k, v in flags.items():
            if not isinstance(v, bool):
                raise ctx.fail(f"{where}.{k}", f"expected true or false, got {v!r}")
        users.append(UserSpec(name, token, tuple(str(g) for g in ctx.seq(u.get("groups"), f"{where}.groups")),
                              tuple(str(n) for n in ctx.seq(u.get("namespaces"), f"{where}.namespaces")),
                              flags["cluster"], sa, flags["metrics"]))
    return users


def write_tokens(directory: Path, users: list[UserSpec]) -> None:
    """``<directory>/<name>.token`` per user (mode 0600), so people and tests can call as that user."""
    if not users:
        return
    directory.mkdir(exist_ok=True)
    for u in users:
        path = directory / f"{u.name}.token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(u.token)


class KubeReviews:
    """The two review endpoints; ``reviews`` counts what was asked, as an audit log would."""

    def __init__(self, users: list[UserSpec]) -> None:
        self.by_token = {u.token: u for u in users}
        self.by_username = {u.username: u for u in users}
        self.reviews: dict[str, int] = {"token": 0, "access": 0}
        #: Reviews ("token", "access") the API server turns away, as its priority and fairness does when
        #: overloaded (429 with Retry-After): one kind can be refused while the other is answered.
        self.throttled: set[str] = set()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """Register the POST routes on the API server's router."""
        router.add_post(TOKEN_REVIEWS, self.token_review)
        router.add_post(ACCESS_REVIEWS, self.access_review)

    @staticmethod
    def _too_many(kind: str) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                                  "reason": "TooManyRequests", "message": f"too many requests: {kind}s are "
                                  "throttled, please try again later", "details": {"retryAfterSeconds": 1}},
                                 status=429, headers={"Retry-After": "1"})

    @staticmethod
    async def _body(req: web.Request, kind: str) -> dict[str, Any] | web.Response:
        try:
            body = await req.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("kind") != kind or not isinstance(body.get("spec"), dict):
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                      "reason": "BadRequest", "message": f"expected a {kind}"}, status=400)
        return body

    async def token_review(self, req: web.Request) -> web.Response:
        """POST TokenReview: ``status.authenticated`` and the user's name, uid and groups."""
        if "token" in self.throttled:
            return self._too_many("TokenReview")
        body = await self._body(req, "TokenReview")
        if isinstance(body, web.Response):
            return body
        self.reviews["token"] += 1
        user = self.by_token.get(str(body["spec"].get("token", "")))
        audiences = body["spec"].get("audiences") or []
        status: dict[str, Any] = {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        if user is not None:
            status = {"authenticated": True, "audiences": audiences,
                      "user": {"username": user.username, "uid": f"uid-{user.name}", "groups": user.all_groups}}
        return web.json_response({**body, "metadata": {"creationTimestamp": None}, "status": status}, status=201)

    async def access_review(self, req: web.Request) -> web.Response:
        """POST SubjectAccessReview: RBAC's answer for ``spec.user`` on costs or on ``/metrics``."""
        if "access" in self.throttled:
            return self._too_many("SubjectAccessReview")
        body = await self._body(req, "SubjectAccessReview")
        if isinstance(body, web.Response):
            return body
        self.reviews["access"] += 1
        spec = body["spec"]
        user = self.by_username.get(str(spec.get("user", "")))
        allowed, reason = False, ""
        res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if user is not None and isinstance(res, dict):
            if (res.get("verb"), res.get("group"), res.get("resource")) == ("get", COST_GROUP, COST_RESOURCE):
                allowed = user.may_get_costs(str(res.get("namespace") or ""))
                reason = f'RBAC: allowed by the role bound to "{user.name}"' if allowed else ""
        elif user is not None and isinstance(non, dict):
            allowed = user.metrics and (non.get("verb"), non.get("path")) == ("get", "/metrics")
            reason = f'RBAC: allowed by the ClusterRole bound to "{user.name}"' if allowed else ""
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return web.json_response({**body, "metadata": {"creationTimestamp": None}, "status": status}, status=201)


def calling_as_users(users: list[UserSpec], *, workdir: Path, listen: str) -> str:
    """What ``sim-cluster`` and ``demo`` print: how to call the aggregator as each user (empty without users)."""
    if not users:
        return ""
    lines = ["call the aggregator as a user (each sees what RBAC lets it get):\n"]
    for u in users:
        path = "/metrics" if u.metrics and not (u.cluster or u.namespaces) else "/api/v1/report"
        lines.append(f'  curl -H "Authorization: Bearer $(cat {workdir}/users/{u.name}.token)" '
                     f"http://{listen}{path}\n")
    return "".join(lines)
