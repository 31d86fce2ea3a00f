"""One agent DaemonSet on every vendor's nodes: several device-metrics URLs, the first that answers is used and
asked first from then on; none answering is the exporter down. Real HTTP peers on loopback."""

from __future__ import annotations

import pytest
from aiohttp import web

from exporter.clients.device_metrics import DeviceMetricsClient, split_urls
from exporter.clients.errors import PeerError
from exporter.sim.runner import free_port
from tests.metrics_peer import serve_metrics


async def serve(text: str, calls: list[int]) -> tuple[web.AppRunner, str]:
    def body() -> str:
        calls.append(1)
        return text

    return await serve_metrics(body)


async def test_first_answering_url_is_kept() -> None:
    """Port 9400 (DCGM) refuses on an AMD node; 5000 answers and is asked first from the next scrape on."""
    calls: list[int] = []
    runner, amd_url = await serve('gpu_gfx_activity{gpu_id="0"} 5\n', calls)
    refused = f"http://127.0.0.1:{free_port()}/metrics"
    client = DeviceMetricsClient(split_urls(f"{refused}, {amd_url}"), 2.0, max_bytes=1 << 20)
    try:
        assert client.url == refused
        assert "gpu_gfx_activity" in await client.fetch()
        assert client.url == amd_url
        await client.fetch()
        assert len(calls) == 2
    finally:
        await client.close()
        await runner.cleanup()


async def test_none_answering_raises() -> None:
    client = DeviceMetricsClient([f"http://127.0.0.1:{free_port()}/metrics"], 2.0, max_bytes=1 << 20)
    try:
        with pytest.raises(PeerError):
            await client.fetch()
    finally:
        await client.close()


def test_split_urls() -> None:
    assert split_urls(" a ,b,, ") == ["a", "b"]
    with pytest.raises(ValueError, match="no device-metrics URL"):
        DeviceMetricsClient([], 1.0, max_bytes=1)
