"""Pull every agent's ``/v1/usage`` concurrently, with a cap, a per-agent timeout and a size limit."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import aiohttp
from pydantic import ValidationError

from exporter.clients.errors import PeerBadResponse, PeerError
from exporter.clients.http_fetch import get_bounded
from exporter.model.usage import UsageSnapshot, parse_snapshot
from exporter.secrets import SecretFile

MAX_USAGE_BYTES = 64 << 20


class InvalidSnapshot(PeerBadResponse):
    """The agent answered, but not with a snapshot the schema accepts (NaN, infinite, negative, …)."""


@dataclass(slots=True)
class PullResult:
    """One agent's answer: its snapshot, or why there is none (``invalid``: refused by the schema)."""

    url: str
    snapshot: UsageSnapshot | None
    error: str | None = None
    invalid: bool = False  # the agent answered with something the schema refused


class AgentPuller:
    """One shared keep-alive session for all agents."""

    def __init__(self, timeout: float, concurrency: int, *, token: SecretFile | None = None,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None) -> None:
        self.timeout = timeout
        self.server_hostname = server_hostname  # agents are pulled by pod IP; their certificate names a Service
        self.semaphore = asyncio.Semaphore(concurrency)
        self.token = token
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(3.0, self.timeout)),
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=2, ssl=self.ssl_context or True))
        return self._session

    async def fetch(self, url: str, ack: float | None) -> UsageSnapshot:
        """One agent's usage snapshot, sending ``ack`` (the timestamp already booked); raises PeerError."""
        target = url.rstrip("/") + "/v1/usage"
        params = {"ack": repr(ack)} if ack is not None else None
        headers = {"Authorization": f"Bearer {self.token.value()}"} if self.token is not None else None
        body = await get_bounded(self._get_session(), target, max_bytes=MAX_USAGE_BYTES, what=f"agent {url}",
                                 params=params, headers=headers, server_hostname=self.server_hostname)
        try:
            return parse_snapshot(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InvalidSnapshot(f"{target}: invalid usage snapshot: {where}: {err['msg']}") from exc

    async def pull(self, url: str, ack: float | None) -> PullResult:
        """Like ``fetch`` within the concurrency cap, with a failure as a result instead of an exception."""
        async with self.semaphore:
            try:
                return PullResult(url, await self.fetch(url, ack))
            except PeerError as exc:
                return PullResult(url, None, str(exc)[:300], invalid=isinstance(exc, InvalidSnapshot))

    async def pull_all(self, targets: dict[str, float | None]) -> list[PullResult]:
        """``targets``: agent URL -> the timestamp already booked for it (sent as the ack)."""
        return list(await asyncio.gather(*(self.pull(u, ack) for u, ack in targets.items())))

    async def close(self) -> None:
        """Close the shared session."""
        if self._session is not None:
            await self._session.close()
