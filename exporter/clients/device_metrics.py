"""The node's device-metrics exporter, wherever it listens: DCGM Exporter (9400), AMD's device-metrics-exporter
(5000) or gaudi-metric-exporter (41611).

One agent DaemonSet runs on GPU nodes of every vendor, so its setting may list several URLs; the first that
answers is the node's exporter and is asked first from then on (a node does not change vendor), the others
only while it does not answer.
"""

from __future__ import annotations

import ssl

from exporter.clients.dcgm import DcgmClient
from exporter.clients.errors import PeerError
from exporter.secrets import SecretFile


class DeviceMetricsClient:
    """Candidate exporter URLs, in order; ``fetch`` returns the first answer."""

    def __init__(self, urls: list[str], timeout: float, *, max_bytes: int, token: SecretFile | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        if not urls:
            raise ValueError("no device-metrics URL")
        self.clients = [DcgmClient(u, timeout, max_bytes=max_bytes, token=token, ssl_context=ssl_context)
                        for u in urls]
        self.current = 0

    @property
    def url(self) -> str:
        """The URL that answered last (the first one before any answer)."""
        return self.clients[self.current].url

    async def fetch(self) -> str:
        """The exposition text of the exporter that answers; raises the current one's ``PeerError`` when none does."""
        order = [self.current, *(i for i in range(len(self.clients)) if i != self.current)]
        first_error: PeerError | None = None
        for i in order:
            try:
                text = await self.clients[i].fetch()
            except PeerError as exc:
                first_error = first_error or exc
                continue
            self.current = i
            return text
        assert first_error is not None
        raise first_error

    async def close(self) -> None:
        """Close every keep-alive session."""
        for client in self.clients:
            await client.close()


def split_urls(setting: str) -> list[str]:
    """``GPUCOST_DCGM_URL`` / ``GPUCOST_DEVICE_METRICS_URL``: one URL or several, comma-separated."""
    return [u.strip() for u in setting.split(",") if u.strip()]
