"""One bounded HTTP GET with aiohttp, its failures mapped to the typed peer errors.

Shared by every HTTP peer we pull (DCGM Exporter, agents), so a timeout, a refused connection or an
oversized body means the same thing everywhere and no caller sees aiohttp's exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from exporter.clients.errors import PeerBadResponse, PeerResponseTooLarge, PeerUnavailable


async def get_bounded(session: aiohttp.ClientSession, url: str, *, max_bytes: int, what: str,
                      params: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None,
                      server_hostname: str | None = None) -> bytes:
    """The body of a 200 answer, at most ``max_bytes``. ``what`` names the peer in error messages;
    ``server_hostname`` is the name a TLS certificate must carry when ``url`` has an address instead."""
    try:
        async with session.get(url, params=params, headers=headers, server_hostname=server_hostname) as resp:
            if resp.status != 200:
                raise PeerBadResponse(f"{what} answered HTTP {resp.status}")
            declared = resp.content_length
            if declared is not None and declared > max_bytes:
                raise PeerResponseTooLarge(f"{what}: body of {declared} bytes exceeds {max_bytes}")
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.content.iter_chunked(1 << 16):
                size += len(chunk)
                if size > max_bytes:
                    raise PeerResponseTooLarge(f"{what}: body exceeds {max_bytes} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
    except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
        raise PeerUnavailable(f"{what} unreachable at {url}: {exc!r}") from exc
    except aiohttp.ClientError as exc:
        raise PeerBadResponse(f"{what} error: {exc!r}") from exc
