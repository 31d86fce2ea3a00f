"""OIDC ID tokens verified locally (joserfc): the issuer's discovery document names its JWKS; the keys are
cached and fetched again when a token names a ``kid`` they lack (the issuer rotated), at most once per
``refresh_floor`` seconds for such kids, so a flood of forged kids cannot make us hammer the issuer. ``iss``, ``aud``,
``exp`` and ``nbf`` are checked with a bounded clock skew.

A token that fails verification is not authenticated (401); an issuer that cannot be reached is
``ReviewUnavailable`` (503). Tokens whose (unverified) ``iss`` is not this issuer go to the API server's
TokenReview instead: ServiceAccount tokens are JWTs too, from the cluster's own issuer.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from joserfc import errors, jwt
from joserfc.jwk import KeySet

from exporter.aggregator.web.access.reviews import Ask, Identity, ReviewUnavailable
from exporter.logs import get_logger

log = get_logger("access")
RESERVED_PREFIX = "system:"  # Kubernetes' own users and groups
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]  # asymmetric only: never "none" or HS*


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """The issuer and what its tokens must say."""

    issuer: str
    audience: str
    username_claim: str = "sub"
    groups_claim: str = "groups"
    leeway: int = 60  # seconds of clock skew tolerated on exp and nbf
    timeout: float = 5.0
    refresh_floor: float = 30.0  # least seconds between two JWKS fetches for unknown kids


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The payload of a compact JWS, not verified (only to route the token); None when it is not one."""
    if token.count(".") != 2:
        return None
    _header, payload, _signature = token.split(".")
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _kid(token: str) -> str | None:
    try:
        head = token.split(".", 1)[0]
        doc = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except ValueError:
        return None
    kid = doc.get("kid") if isinstance(doc, dict) else None
    return kid if isinstance(kid, str) else None


class OidcVerifier:
    """Verifies this issuer's ID tokens against its JWKS, fetched through ``session``."""

    def __init__(self, settings: OidcSettings, *, now: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._now = now
        self._monotonic = monotonic
        self._keys: KeySet | None = None
        self._unknown_kid_at = -1e18  # when an unknown kid last made us fetch the JWKS
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None
        self.jwks_fetches = 0

    def claims_issuer(self, token: str) -> bool:
        """Whether the token says it comes from this issuer (then only this verifier may accept it)."""
        claims = unverified_claims(token)
        return claims is not None and claims.get("iss") == self.settings.issuer

    async def close(self) -> None:
        """Close the HTTP session, if one was opened."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _get_json(self, url: str) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.settings.timeout))
        try:
            async with self._session.get(url) as resp:
                if resp.status != 200:
                    raise ReviewUnavailable(f"OIDC issuer: HTTP {resp.status} from {url}")
                doc = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            raise ReviewUnavailable(f"OIDC issuer unreachable ({type(exc).__name__})") from None
        if not isinstance(doc, dict):
            raise ReviewUnavailable(f"OIDC issuer: {url} is not a JSON object")
        return doc

    async def _refresh(self) -> KeySet:
        """Discovery, then the JWKS it names; the issuer in the document must be ours."""
        discovery = await self._get_json(self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration")
        if discovery.get("issuer") != self.settings.issuer or not isinstance(discovery.get("jwks_uri"), str):
            raise ReviewUnavailable("OIDC discovery: issuer mismatch or no jwks_uri")
        try:
            keys = KeySet.import_key_set(await self._get_json(discovery["jwks_uri"]))  # type: ignore[arg-type]
        except (errors.JoseError, ValueError, KeyError, TypeError):
            raise ReviewUnavailable("OIDC issuer: its JWKS could not be read") from None
        self.jwks_fetches += 1
        return keys

    async def _keys_for(self, kid: str | None) -> KeySet:
        async with self._lock:
            if self._keys is None:
                self._keys = await self._refresh()
            elif kid is not None and not any(k.kid == kid for k in self._keys.keys) and (
                    self._monotonic() - self._unknown_kid_at >= self.settings.refresh_floor):
                self._unknown_kid_at = self._monotonic()
                self._keys = await self._refresh()
            return self._keys

    async def authenticate(self, token: str) -> Identity | None:
        """The token's identity when its signature, issuer, audience and times check out; None otherwise."""
        keys = await self._keys_for(_kid(token))
        s = self.settings
        try:
            decoded = jwt.decode(token, keys, algorithms=ALGORITHMS)
            jwt.JWTClaimsRegistry(
                now=int(self._now()), leeway=s.leeway, iss={"essential": True, "value": s.issuer},
                aud={"essential": True, "value": s.audience}, exp={"essential": True},
            ).validate(decoded.claims)
        except (errors.JoseError, ValueError) as exc:
            log.info("oidc_token_rejected", reason=type(exc).__name__)  # never the token
            return None
        user, groups = decoded.claims.get(s.username_claim), decoded.claims.get(s.groups_claim) or []
        if not isinstance(user, str) or not user or not isinstance(groups, list):
            return None
        if s.username_claim == "email" and decoded.claims.get("email_verified") is not True:
            log.info("oidc_token_rejected", reason="email_not_verified")  # an address anyone could register
            return None
        if any(str(name).startswith(RESERVED_PREFIX) for name in (user, *groups)):
            # system: names are the API server's own (system:masters, service accounts): an issuer's claim
            # must not be read as one of them
            log.info("oidc_token_rejected", reason="reserved_name")
            return None
        return Identity(user=user, groups=(*(str(g) for g in groups), "system:authenticated"))



class OidcOrKube:
    """Authentication by the OIDC issuer for its tokens, by TokenReview for the rest; RBAC by the API server."""

    def __init__(self, oidc: OidcVerifier, kube: Any) -> None:
        self.oidc = oidc
        self.kube = kube

    async def authenticate(self, token: str) -> Identity | None:
        """The issuer's verdict on its own tokens; TokenReview's on every other."""
        if self.oidc.claims_issuer(token):
            return await self.oidc.authenticate(token)
        who: Identity | None = await self.kube.authenticate(token)
        return who

    async def allowed(self, who: Identity, ask: Ask) -> bool:
        """SubjectAccessReview, whoever authenticated the caller."""
        ok: bool = await self.kube.allowed(who, ask)
        return ok
