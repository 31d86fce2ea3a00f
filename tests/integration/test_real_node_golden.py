"""Golden scenario of real nodes: the agents find their exporters as the chart configures them (the exporter pod
on their own node, through the API, at the pod's address -- nothing answers on a node's address), and one
node's exporter answers with another node's name. The arithmetic is written in the test."""

from __future__ import annotations

import sqlite3
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from structlog.testing import capture_logs

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

SCENARIO = """
tick: 60s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 1}
  - {name: n1, model: "NVIDIA H100 80GB HBM3", gpus: 1}
  - {name: n2, model: "NVIDIA H100 80GB HBM3", gpus: 1, exporter_hostname: n0}
pods:
  - {name: p0, namespace: team-a, node: n0, gpus: 1, utilization: 0.5}
  - {name: p1, namespace: team-b, node: n1, gpus: 1, utilization: 0.25}
  - {name: p2, namespace: team-c, node: n2, gpus: 1, utilization: 0.75}
"""


@pytest.mark.timeout(300)
async def test_own_exporters_book_exactly_and_another_nodes_scrape_books_nothing_as_used(tmp_path: Path) -> None:
    """p0: 1 GPU x 1 h = 1 GPU-h at 4.00/h = 4.00; used 1 h x 0.5 = 0.5 GPU-h. p1: 1 GPU-h, 4.00, used
    1 h x 0.25 = 0.25. p2 on n2, whose exporter says Hostname="n0": 1 GPU-h allocated and priced (4.00),
    used 0 and unmeasured 1 GPU-h -- n0's reading is never booked on n2. n2's agent says why: /readyz 503
    with the reason, gpucost_agent_exporter_refused{reason="hostname_mismatch"} = 61 (every tick 0..60),
    and one exporter_refused log line."""
    ledger = tmp_path / "ledger.db"
    scenario = parse_scenario(SCENARIO, "real-nodes.yaml")
    start = float(int(1.8e9 // 3600) * 3600)
    clock = VirtualClock(start)
    with tempfile.TemporaryDirectory(prefix="gce-") as work, capture_logs() as logs:
        pipe = Pipeline(scenario, Path(work), clock=clock, ledger=ledger)
        await pipe.start(serve_aggregator=False)
        try:
            for k in range(61):
                await pipe.step(k * scenario.tick)
            agents = pipe.agents
            for node in ("n0", "n1"):  # found at its pod's address, which is not its node's
                assert agents[node].dcgm.discovering and agents[node].dcgm.pod.startswith("nvidia-dcgm-exporter-")
                assert agents[node].dcgm.url == pipe.peers.nodes[node].dcgm.url
                assert agents[node].health_report()["status"] == "ok"
            report = agents["n2"].health_report()
            metrics = generate_latest(agents["n2"].registry).decode()
        finally:
            await pipe.close()
    assert report["status"] == "degraded"
    assert report["reasons"] == ["exporter refused: the exporter reports hostname n0; this node is n2"]
    assert 'gpucost_agent_exporter_refused_total{node="n2",reason="hostname_mismatch"} 61.0' in metrics
    assert 'gpucost_agent_ready{node="n2"} 0.0' in metrics
    refused = [e for e in logs if e.get("event") == "exporter_refused"]
    assert [(e["node"], e["reason"]) for e in refused] == [("n2", "hostname_mismatch")]

    conn = sqlite3.connect(ledger)
    rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), "pod", since=None, until=None)
    conn.close()
    by_pod = {r["pod"]: r for r in rows}
    def row(pod: str) -> tuple[Decimal, ...]:
        r = by_pod[pod]
        return tuple(Decimal(str(r[k])) for k in ("allocated_gpu_hours", "used_gpu_hours", "unmeasured_gpu_hours",
                                                   "cost"))

    assert row("p0") == (Decimal(1), Decimal("0.5"), Decimal(0), Decimal(4))
    assert row("p1") == (Decimal(1), Decimal("0.25"), Decimal(0), Decimal(4))
    assert row("p2") == (Decimal(1), Decimal(0), Decimal(1), Decimal(4))


@pytest.mark.timeout(120)
async def test_no_exporter_pod_on_the_node_is_not_ready_and_says_what_it_looked_for(tmp_path: Path) -> None:
    """Selectors that match no pod on the node: the exporter is down for the agent (its node's time unmeasured),
    /readyz 503, and the error names the node and the selectors; an API it cannot read is said to be that."""
    from exporter.agent.service import Agent

    scenario = parse_scenario(SCENARIO, "real-nodes.yaml")
    clock = VirtualClock(float(int(1.8e9 // 3600) * 3600))
    with tempfile.TemporaryDirectory(prefix="gce-") as work:
        pipe = Pipeline(scenario, Path(work), clock=clock, ledger=tmp_path / "l.db")
        await pipe.peers.start()
        await pipe.peers.advance(0.0)
        try:
            settings = pipe.agent_settings("n1").model_copy(update={"exporter_selectors": "app=absent@9400"})
            agent = Agent(settings, clock=clock)
            await agent.tick()
            report = agent.health_report()
            await agent.close()
            no_api = Agent(pipe.agent_settings("n1").model_copy(update={"kubeconfig": tmp_path / "absent"}),
                           clock=clock)
            await no_api.tick()
            blind = no_api.health_report()
            await no_api.close()
        finally:
            await pipe.peers.close()
    assert report["status"] == "degraded" and "dcgm down" in report["reasons"]
    assert report["last_error"] == "no exporter pod on node n1 matches 'app=absent@9400'"
    assert blind["status"] == "degraded" and "dcgm down" in blind["reasons"]
    assert blind["last_error"].startswith("exporter discovery could not list the pods of node n1")
