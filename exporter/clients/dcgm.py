"""Fetch DCGM Exporter's ``/metrics`` over HTTP with timeouts and a body-size limit.

There is deliberately no backoff beyond the tick itself: one request per tick cannot hammer an exporter,
and every scrape skipped after it recovers would turn measured GPU time into unmeasured time.
"""

from __future__ import annotations

import ssl

import aiohttp

from exporter.clients.http_fetch import get_bounded
from exporter.secrets import SecretFile


class DcgmClient:
    """One keep-alive session to one DCGM Exporter endpoint."""

    def __init__(self, url: str, timeout: float, *, max_bytes: int, token: SecretFile | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.max_bytes = max_bytes
        # A bearer token goes only over https (AMD's kube-rbac-proxy), never in clear text.
        self.token = token if url.startswith("https://") else None
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(self.timeout, 3.0)),
                headers={"Accept": "text/plain;version=0.0.4"},
                connector=aiohttp.TCPConnector(ssl=self.ssl_context if self.ssl_context is not None else True),
            )
        return self._session

    async def fetch(self) -> str:
        """The exposition text. Raises ``PeerUnavailable``/``PeerResponseTooLarge``/``PeerBadResponse``."""
        session = await self._get_session()
        headers = {"Authorization": f"Bearer {self.token.value()}"} if self.token is not None else None
        body = await get_bounded(session, self.url, max_bytes=self.max_bytes, what="DCGM Exporter", headers=headers)
        return body.decode("utf-8", errors="replace")

    async def close(self) -> None:
        """Close the keep-alive session; the next fetch opens a new one."""
        if self._session is not None:
            await self._session.close()
            self._session = None
