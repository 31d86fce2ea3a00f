"""Fetch DCGM Exporter's ``/metrics`` over HTTP with timeouts and a body-size limit.

There is deliberately no backoff beyond the tick itself: one request per tick cannot hammer an exporter,
and every scrape skipped after it recovers would turn measured GPU time into unmeasured time.
"""

from __future__ import annotations

import aiohttp

from exporter.clients.http_fetch import get_bounded


class DcgmClient:
    """One keep-alive session to one DCGM Exporter endpoint."""

    def __init__(self, url: str, timeout: float, *, max_bytes: int) -> None:
        self.url = url
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(self.timeout, 3.0)),
                headers={"Accept": "text/plain;version=0.0.4"},
            )
        return self._session

    async def fetch(self) -> str:
        """The exposition text. Raises ``PeerUnavailable``/``PeerResponseTooLarge``/``PeerBadResponse``."""
        session = await self._get_session()
        body = await get_bounded(session, self.url, max_bytes=self.max_bytes, what="DCGM Exporter")
        return body.decode("utf-8", errors="replace")

    async def close(self) -> None:
        """Close the keep-alive session; the next fetch opens a new one."""
        if self._session is not None:
            await self._session.close()
            self._session = None
