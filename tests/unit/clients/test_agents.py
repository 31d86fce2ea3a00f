"""Pulling agents over HTTP (``clients/agents.py``, ``clients/http_fetch.py``) against a real aiohttp server
on loopback: every way a peer can fail comes back as one typed peer error, never as aiohttp's."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from exporter.clients import agents
from exporter.clients.agents import AgentPuller, InvalidSnapshot
from exporter.clients.errors import PeerBadResponse, PeerResponseTooLarge, PeerUnavailable
from exporter.clients.http_fetch import get_bounded

SNAPSHOT = {"node": "n1", "epoch": "e1", "timestamp": 7200.0, "seq": 3}
LIMIT = 1024


@dataclass
class Peer:
    """A loopback HTTP server whose answer each test sets; it records the requests it was sent."""

    url: str
    answer: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None
    seen: list[web.Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)  # lets a stalled answer end at teardown


@pytest.fixture(name="peer")
async def _peer() -> AsyncIterator[Peer]:
    peer = Peer(url="")

    async def handle(request: web.Request) -> web.StreamResponse:
        peer.seen.append(request)
        assert peer.answer is not None
        return await peer.answer(request)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    peer.url = f"http://127.0.0.1:{port}"
    yield peer
    peer.release.set()
    await runner.cleanup()


def _closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _fetch(url: str, *, timeout: float = 5.0) -> bytes:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        return await get_bounded(session, url, max_bytes=LIMIT, what="peer")


# -- get_bounded ------------------------------------------------------------------------------------

async def test_a_body_of_exactly_the_limit_is_returned_whole(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.Response(body=b"x" * LIMIT)

    peer.answer = answer
    assert await _fetch(peer.url) == b"x" * LIMIT


async def test_a_declared_body_over_the_limit_is_refused_before_reading(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.Response(body=b"x" * (LIMIT + 1))  # Content-Length: 1025

    peer.answer = answer
    with pytest.raises(PeerResponseTooLarge, match="body of 1025 bytes exceeds 1024"):
        await _fetch(peer.url)


async def test_a_streamed_body_over_the_limit_is_refused(peer: Peer) -> None:
    """No Content-Length (chunked): the limit is counted while reading, 600 + 600 = 1200 > 1024."""
    async def answer(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(2):
            await resp.write(b"x" * 600)
        await resp.write_eof()
        return resp

    peer.answer = answer
    with pytest.raises(PeerResponseTooLarge, match="body exceeds 1024 bytes"):
        await _fetch(peer.url)


async def test_a_small_compressed_body_that_unpacks_past_the_limit_is_refused(peer: Peer) -> None:
    """A gzip body declares its compressed length (a few dozen bytes) while aiohttp unpacks it: the limit counts
    the unpacked bytes, 20 KiB > 1024, so a hostile peer cannot send a small bomb past it."""
    packed = gzip.compress(b"x" * 20 * 1024)
    assert len(packed) < LIMIT

    async def answer(_r: web.Request) -> web.Response:
        return web.Response(body=packed, headers={"Content-Encoding": "gzip"})

    peer.answer = answer
    with pytest.raises(PeerResponseTooLarge, match="body exceeds 1024 bytes"):
        await _fetch(peer.url)


async def test_an_error_status_is_a_bad_response(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.Response(status=503, text="busy")

    peer.answer = answer
    with pytest.raises(PeerBadResponse, match="HTTP 503"):
        await _fetch(peer.url)


async def test_a_refused_connection_is_unavailable() -> None:
    with pytest.raises(PeerUnavailable, match="unreachable"):
        await _fetch(f"http://127.0.0.1:{_closed_port()}/")


async def test_an_answer_that_never_comes_is_unavailable(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        await peer.release.wait()
        return web.Response(text="late")

    peer.answer = answer
    with pytest.raises(PeerUnavailable, match="unreachable"):
        await _fetch(peer.url, timeout=0.2)


# -- AgentPuller ------------------------------------------------------------------------------------

async def _pull(url: str, *, timeout: float = 5.0, ack: float | None = None) -> agents.PullResult:
    puller = AgentPuller(timeout, 4)
    try:
        return await puller.pull(url, ack)
    finally:
        await puller.close()


async def test_a_snapshot_is_read_and_the_ack_sent(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.json_response(SNAPSHOT)

    peer.answer = answer
    result = await _pull(peer.url, ack=3600.0)
    assert result.error is None and result.snapshot is not None
    assert (result.snapshot.node, result.snapshot.seq) == ("n1", 3)
    assert [(r.path, r.query.get("ack")) for r in peer.seen] == [("/v1/usage", "3600.0")]


async def test_a_body_that_is_not_json_is_an_invalid_snapshot(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.Response(text="<html>not an agent</html>")

    peer.answer = answer
    puller = AgentPuller(5.0, 4)
    try:
        with pytest.raises(InvalidSnapshot, match="invalid usage snapshot") as caught:
            await puller.fetch(peer.url, None)
    finally:
        await puller.close()
    assert isinstance(caught.value, PeerBadResponse)
    result = await _pull(peer.url)
    assert result.snapshot is None and result.invalid and "invalid usage snapshot" in (result.error or "")


async def test_a_snapshot_the_schema_refuses_names_the_field(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        return web.Response(text=json.dumps({**SNAPSHOT, "timestamp": -1.0}), content_type="application/json")

    peer.answer = answer
    result = await _pull(peer.url)
    assert result.invalid and "timestamp" in (result.error or "")


async def test_an_oversized_snapshot_is_too_large(peer: Peer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agents, "MAX_USAGE_BYTES", LIMIT)  # the real limit is 64 MiB

    async def answer(_r: web.Request) -> web.Response:
        return web.json_response({**SNAPSHOT, "epoch": "e" * 64, "holders": [], "pad": "x" * LIMIT})

    peer.answer = answer
    puller = AgentPuller(5.0, 4)
    try:
        with pytest.raises(PeerResponseTooLarge):
            await puller.fetch(peer.url, None)
    finally:
        await puller.close()
    result = await _pull(peer.url)
    assert result.snapshot is None and not result.invalid and "exceeds 1024" in (result.error or "")


async def test_a_refused_agent_is_unavailable() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    puller = AgentPuller(5.0, 4)
    try:
        with pytest.raises(PeerUnavailable):
            await puller.fetch(url, None)
    finally:
        await puller.close()
    result = await _pull(url)
    assert result.snapshot is None and not result.invalid and "unreachable" in (result.error or "")


async def test_an_agent_that_never_answers_is_unavailable(peer: Peer) -> None:
    async def answer(_r: web.Request) -> web.Response:
        await peer.release.wait()
        return web.json_response(SNAPSHOT)

    peer.answer = answer
    puller = AgentPuller(0.2, 4)
    try:
        with pytest.raises(PeerUnavailable):
            await puller.fetch(peer.url, None)
    finally:
        await puller.close()
