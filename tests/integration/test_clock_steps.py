"""A node whose wall clock steps back 10 minutes and later forward again (an NTP correction, a VM migration)
loses and doubles no GPU-second: the real agents, aggregator and ledger on a virtual clock, with node ``n0``'s
agent reading a wall clock that is 600 s behind from 00:10 to 00:30, and ``n1`` (the same pod, the same
GPUs) reading the true one. Both books must be identical: each pod held 1 GPU for the whole hour = 3600 GPU-s,
each node's 2 GPUs x 3600 s = 7200 GPU-s in allocated + unallocated, to 1e-6; ``ledger verify`` finds nothing;
the agent reports both steps (``gpucost_agent_clock_steps_total``, a ``clock_stepped`` log line each).

The agent's time is its ``Timeline``: the wall clock read once at start, then advanced by the monotonic clock.
Here the monotonic clock is the virtual one, and the stepped wall clock is that plus the step."""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog
from prometheus_client import generate_latest

from exporter.agent.service import Agent
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.cli import main
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

HOUR0 = 1_800_000_000.0  # an hour boundary: scenario time 0
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}, {name: n1, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: a, namespace: t, node: n0, gpus: 1, utilization: 0.5},
       {name: b, namespace: t, node: n1, gpus: 1, utilization: 0.5}]
"""
BACK_AT, FORWARD_AT, STEP = 607.0, 1_807.0, 600.0  # mid-tick, as a real step would be


class SteppedClock:
    """The node's clocks: monotonic = the virtual time; the wall clock is 600 s behind it in [BACK_AT, FORWARD_AT)."""

    def __init__(self, virtual: VirtualClock) -> None:
        self.virtual = virtual

    def now(self) -> float:
        t = self.virtual.now()
        return t - STEP if HOUR0 + BACK_AT <= t < HOUR0 + FORWARD_AT else t

    def monotonic(self) -> float:
        return self.virtual.now()


class SteppedPipeline(Pipeline):
    """The simulation's pipeline with node n0's agent on the stepped clock."""

    async def start_agent(self, node: str) -> None:
        if node != "n0":
            await super().start_agent(node)
            return
        assert isinstance(self.clock, VirtualClock)
        agent = Agent(self.agent_settings(node), clock=SteppedClock(self.clock))
        await agent.start_http()
        await agent.start_pod_watch()
        self.agents[node] = agent


async def _run(ledger: Path, workdir: Path) -> tuple[str, list[dict[str, Any]]]:
    """Tick the hour (and the tick after it, so its last second is booked) into ``ledger``; n0's metrics text and
    its step log lines."""
    clock = VirtualClock(HOUR0)
    pipe = SteppedPipeline(parse_scenario(SCENARIO, "steps.yaml"), workdir, clock=clock, ledger=ledger)
    await pipe.start(serve_aggregator=False)
    try:
        with structlog.testing.capture_logs() as logs:
            for k in range(3600 // 15 + 2):
                await pipe.step(k * 15.0)
        metrics = generate_latest(pipe.agents["n0"].registry).decode()
    finally:
        await pipe.close()
    return metrics, [dict(e) for e in logs if e.get("event") == "clock_stepped"]


@pytest.mark.timeout(180)
def test_a_clock_stepped_back_then_forward_loses_and_doubles_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    metrics, steps = asyncio.run(_run(ledger, tmp_path / "sim"))
    conn = sqlite3.connect(ledger)
    try:
        def q(sql: str) -> list[tuple[Any, ...]]:
            rows = decoded_rows(conn.execute(sql))
            return [tuple(float(v) if isinstance(v, Decimal) else v for v in r) for r in rows]

        held = dict(q("SELECT pod, SUM(allocated_s) AS allocated_s FROM usage WHERE hour = 1800000000 GROUP BY pod"))
        free = dict(q("SELECT node, SUM(seconds) AS seconds FROM unallocated WHERE hour = 1800000000 GROUP BY node"))
        unobserved = q("SELECT COALESCE(SUM(seconds), 0) AS seconds FROM unobserved")[0][0]
        spans = {n: (s, b) for n, s, b in conn.execute("SELECT node, since, booked_ts FROM agents")}
    finally:
        conn.close()
    # The whole hour, each second once: pod a on the stepped node is booked exactly as pod b on the other.
    assert held["a"] == pytest.approx(3600.0, abs=1e-6) and held["b"] == pytest.approx(3600.0, abs=1e-6), held
    assert free["n0"] == pytest.approx(3600.0, abs=1e-6) and free["n1"] == pytest.approx(3600.0, abs=1e-6), free
    assert unobserved == 0.0
    assert spans["n0"] == spans["n1"]  # the same timeline: the hours are placed where the other node puts them
    # Reported: one step back by 600 s, one forward by 600 s; the offset is 0 again.
    assert [(e["direction"], e["by_seconds"], e["node"]) for e in steps] == [("back", -600.0, "n0"),
                                                                              ("forward", 600.0, "n0")]
    assert 'gpucost_agent_clock_steps_total{direction="back"} 1.0' in metrics
    assert 'gpucost_agent_clock_steps_total{direction="forward"} 1.0' in metrics
    assert "gpucost_agent_clock_offset_seconds 0.0" in metrics
    assert main(["ledger", "verify", "--ledger", str(ledger)]) == 0  # per node-hour conservation, totals, marks
