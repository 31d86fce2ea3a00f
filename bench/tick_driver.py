"""One aggregator's ticks against simulated agents, in this (fresh) process: prints one JSON object.

Run as ``python -m bench.tick_driver`` with the tree to measure first on ``PYTHONPATH`` (this checkout, or an
older commit's tree: only ``Aggregator``, its settings and ``freeze_long_lived`` are used unless ``--phases``
asks for the phase wrappers of ``bench.phase_timer``). A fresh process makes its memory figures its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any


def proc_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field in MB (VmRSS: resident now, VmHWM: resident at its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(args: argparse.Namespace) -> Any:
    from exporter.config import AggregatorSettings

    extra: dict[str, Any] = {"shards": args.shards, "shard_index": args.shard_index} if args.shards > 1 else {}
    return AggregatorSettings(listen=f"127.0.0.1:{_free_port()}", ledger=args.ledger,
                              ledger_password_file=args.password_file, cluster="bench",
                              agents=[f"{args.agents}/{i}" for i in range(args.nodes)],
                              pull_concurrency=128, pull_timeout=120, **extra)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    import exporter
    from exporter.aggregator.service import Aggregator
    from exporter.runtime import freeze_long_lived

    clock = None
    if args.phases:
        from bench.phase_timer import install

        clock = install()
    agg = Aggregator(_settings(args))
    await agg.start(serve_http=False)
    freeze_long_lived()  # as ``Aggregator.run`` does after its start
    rss_started = proc_mb("VmRSS")
    times: list[float] = []
    phases: list[dict[str, float]] = []
    for _ in range(args.ticks):
        t0 = time.perf_counter()
        await agg.tick()
        times.append(time.perf_counter() - t0)
        if clock is not None:
            phases.append(clock.take(times[-1]))
    agents_up = sum(1 for a in agg.gauges.agents.values() if a.up)  # a tick that pulled nothing is not a figure
    await agg.close()
    return {"exporter": exporter.__file__, "nodes": args.nodes, "agents_up": agents_up, "times": times,
            "phases": phases, "rss_after_start_mb": round(rss_started, 1), "rss_mb": round(proc_mb("VmRSS"), 1),
            "peak_rss_mb": round(proc_mb("VmHWM"), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", required=True, help="URL prefix of the simulated agents: <prefix>/<i>")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--ticks", type=int, required=True)
    parser.add_argument("--ledger", required=True, help="SQLite path or postgresql:// URL")
    parser.add_argument("--password-file", type=Path, default=None)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--shard-index", type=int, default=0)
    parser.add_argument("--phases", action="store_true", help="time pull, decode, book and commit")
    args = parser.parse_args()
    from exporter.logs import configure_logging

    configure_logging("error", "json")
    print(json.dumps(asyncio.run(_run(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
