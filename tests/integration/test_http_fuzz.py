"""Random and hostile query parameters against both daemons' real HTTP servers: never a 500, never a
hang, oversized requests refused."""

from __future__ import annotations

import random
import string
from pathlib import Path

import aiohttp

from exporter.aggregator.service import Aggregator
from exporter.config import AggregatorSettings
from exporter.sim.runner import free_port

ALPHABET = string.printable + "äöü€\u2028<>\"'%&;"


def _junk(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 300)))


async def test_aggregator_query_parameters(tmp_path: Path) -> None:
    """600 requests with random by/since/until/namespace/workload values: only 200, 400 or 404."""
    listen = f"127.0.0.1:{free_port()}"
    agg = Aggregator(AggregatorSettings(listen=listen, ledger=tmp_path / "l.db", agents=[]))
    await agg.start()
    rng = random.Random(1)
    statuses: dict[int, int] = {}
    try:
        async with aiohttp.ClientSession() as s:
            for i in range(300):
                params = {"by": rng.choice(["namespace", "pod", "node", _junk(rng)]),
                          "since": rng.choice(["24h", "2026-11-30T00:00:00Z", _junk(rng)]),
                          "until": rng.choice(["", "now", _junk(rng)])}
                async with s.get(f"http://{listen}/api/v1/report", params=params) as r:
                    statuses[r.status] = statuses.get(r.status, 0) + 1
                params = {"namespace": _junk(rng), "workload": _junk(rng)} if i % 2 else {}
                async with s.get(f"http://{listen}/api/v1/keda/utilization", params=params) as r:
                    statuses[r.status] = statuses.get(r.status, 0) + 1
            async with s.post(f"http://{listen}/api/v1/report", data=b"x" * (2 << 20)) as r:
                assert r.status in (405, 413)
            async with s.get(f"http://{listen}/") as r:
                assert r.status == 200
    finally:
        await agg.close()
    assert set(statuses) <= {200, 400, 404}, statuses
    assert statuses.get(400, 0) > 0 and statuses.get(200, 0) > 0
