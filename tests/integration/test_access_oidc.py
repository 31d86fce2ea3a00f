"""OIDC ID tokens (GPUCOST_OIDC_ISSUER + GPUCOST_OIDC_AUDIENCE): a real issuer served by aiohttp on loopback
(discovery document and JWKS, keys generated here) and the real aggregator of tests/integration/test_access.py,
whose RBAC answers still come from the simulated API server's SubjectAccessReview (alice: ai-training).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.integration.test_access import World, open_world

AUDIENCE = "gpu-cost-exporter"


@dataclass
class Issuer:
    """A local OIDC issuer: its URL, the keys its JWKS serves, and how often the JWKS was fetched."""

    server: TestServer
    keys: list[RSAKey] = field(default_factory=list)
    jwks_hits: int = 0

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def token(self, key: RSAKey, **claims: Any) -> str:
        """An RS256 ID token signed by ``key``, valid for 10 minutes unless ``claims`` say otherwise."""
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "alice", "groups": ["team-a"], "iat": now,
                "exp": now + 600, **claims}
        return jwt.encode({"alg": "RS256", "kid": str(key.kid)}, body, key)


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid})


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    app = web.Application()
    found = Issuer(TestServer(app))

    async def discovery(_req: web.Request) -> web.Response:
        return web.json_response({"issuer": found.url, "jwks_uri": found.url + "/keys",
                                  "id_token_signing_alg_values_supported": ["RS256"]})

    async def keys(_req: web.Request) -> web.Response:
        found.jwks_hits += 1
        return web.json_response({"keys": [k.as_dict(private=False) for k in found.keys]})

    app.router.add_get("/.well-known/openid-configuration", discovery)
    app.router.add_get("/keys", keys)
    found.keys.append(_key("k1"))
    await found.server.start_server()
    try:
        yield found
    finally:
        await found.server.close()


@pytest.fixture
async def world(tmp_path: Path, issuer: Issuer) -> AsyncIterator[World]:
    async with open_world(tmp_path, extra={"oidc_issuer": issuer.url, "oidc_audience": AUDIENCE}, ticks=9) as found:
        yield found


async def test_an_oidc_user_reads_its_namespaces_rows(world: World, issuer: Issuer) -> None:
    """A valid ID token of alice: her namespace's rows (RBAC by SubjectAccessReview), no TokenReview asked; the
    keys are fetched once for many tokens."""
    for _ in range(3):
        status, rows = await world.get("/api/v1/report", issuer.token(issuer.keys[0], jti=str(time.time_ns())))
        assert status == 200 and {r["namespace"] for r in rows} == {"ai-training"}
    assert world.reviews["token"] == 0
    assert issuer.jwks_hits == 1


@pytest.mark.parametrize("bad", ["expired", "not_yet", "audience", "signature", "no_exp", "other_issuer",
                                 "system_user", "system_group"])
async def test_a_bad_oidc_token_is_401(world: World, issuer: Issuer, bad: str) -> None:
    """Expired past the skew, not valid yet, for another audience, signed by a key the issuer never published
    (same kid), without exp, or from another issuer (then TokenReview, which does not know it): 401."""
    key, now = issuer.keys[0], int(time.time())
    token = {
        "expired": lambda: issuer.token(key, exp=now - 120),
        "not_yet": lambda: issuer.token(key, nbf=now + 600),
        "audience": lambda: issuer.token(key, aud="someone-else"),
        "signature": lambda: issuer.token(_key("k1")),
        "no_exp": lambda: jwt.encode({"alg": "RS256", "kid": "k1"}, {"iss": issuer.url, "aud": AUDIENCE,
                                                                      "sub": "alice"}, key),
        "other_issuer": lambda: issuer.token(key, iss="https://elsewhere.example"),
        # a signed token may not name the API server's own users or groups (system:masters reads everything)
        "system_user": lambda: issuer.token(key, sub="system:admin"),
        "system_group": lambda: issuer.token(key, groups=["team-a", "system:masters"]),
    }[bad]()
    assert (await world.get("/api/v1/report", token))[0] == 401
    assert (await world.get("/api/v1/report", issuer.token(key)))[0] == 200  # the issuer's good token passes


async def test_an_unknown_kid_fetches_the_keys_again_once(world: World, issuer: Issuer) -> None:
    """After a rotation, a token with the new kid makes the aggregator fetch the JWKS again and is accepted; a
    forged kid right after is refused without another fetch."""
    assert (await world.get("/api/v1/report", issuer.token(issuer.keys[0])))[0] == 200
    assert issuer.jwks_hits == 1
    issuer.keys.append(_key("k2"))
    assert (await world.get("/api/v1/report", issuer.token(issuer.keys[1])))[0] == 200
    assert issuer.jwks_hits == 2
    assert (await world.get("/api/v1/report", issuer.token(_key("k3"))))[0] == 401
    assert issuer.jwks_hits == 2


async def test_an_unreachable_issuer_is_503(world: World, issuer: Issuer) -> None:
    """The issuer's keys cannot be fetched: its tokens get 503, not the data."""
    token = issuer.token(issuer.keys[0])
    await issuer.server.close()
    status, body = await world.get("/api/v1/report", token)
    assert status == 503 and "ai-training" not in str(body)
