"""Simulated agents for the aggregator benchmarks: one aiohttp server in its own process answers
``/a/<i>/v1/usage`` for any ``i`` with node ``node-<i>``'s snapshot (8 H100s, counters advancing per pull)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

AGENTS_SERVER = r"""
import json, sys, time
from aiohttp import web
n, port = int(sys.argv[1]), int(sys.argv[2])
seq = {}
async def usage(req):
    i = int(req.match_info["i"])
    k = seq.get(i, 0) + 1
    seq[i] = k
    holders = [{"namespace": f"ns-{(i * 8 + g) % 500}", "pod": f"pod-{i}-{g}", "container": "main",
                "device_id": f"GPU-{i:05d}-{g}", "gpu_uuid": f"GPU-{i:05d}-{g}", "gpu_model": "NVIDIA H100 80GB HBM3",
                "fraction": 1.0, "active": True, "allocated_s": 15.0 * k, "used_s": 7.5 * k, "unmeasured_s": 0.0,
                "energy_j": 5000.0 * k, "utilization": 0.5} for g in range(8)]
    body = {"node": f"node-{i}", "epoch": "e1", "timestamp": time.time(), "seq": k, "holders": holders,
            "unallocated": [{"gpu_model": "NVIDIA H100 80GB HBM3", "seconds": 0.0}]}
    return web.Response(body=json.dumps(body).encode(), content_type="application/json")
app = web.Application()
app.router.add_get("/a/{i}/v1/usage", usage)
web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
"""


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, *, timeout: float) -> None:
    """Return once ``port`` accepts connections (the server's start-up is not timed); raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def agents_peer(nodes: int = 0) -> Iterator[str]:
    """Serve the simulated agents; yields the URL prefix (``<prefix>/<i>`` is agent ``i``)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", AGENTS_SERVER, str(nodes), str(port)])
    try:
        wait_listening(port, timeout=60.0)
        yield f"http://127.0.0.1:{port}/a"
    finally:
        server.terminate()
        server.wait(timeout=30)
