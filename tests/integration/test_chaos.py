"""Chaos: 8 nodes in real time (1 s ticks), real agent and aggregator processes, and a driver that
SIGKILLs the aggregator at random moments, SIGKILLs agents (state kept, and once deleted), while the
scenario stops DCGM endpoints, removes a kubelet socket, compacts the API server's history (410 Gone)
and ends pods mid-tick. At the end:
* the ledger equals the agents' own counters, exactly once (1e-6 GPU-s);
* per node and hour, allocated + unallocated + unobserved = 2 GPUs x the seconds booked (1e-6);
* the allocated time equals the exact integral of the scenario (pods hold from startTime to finishedAt,
  to the second), within 0.1 % over the nodes whose agents kept their state; where the state file was
  deleted, what is missing is exactly what was booked as unobserved."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.sim.scenario import parse_scenario
from tests.conftest import REPO
from tests.procs import get, usage, wait
from tests.sim_fixture import SimClusterFactory

NODES = 8
# Every pod holds its GPUs within [START, END] scenario seconds. Ten processes start at once before START: 30 s
# leaves room for a loaded machine (the test runs beside other test modules).
START, END = 30.0, 75.0


def _scenario() -> str:
    nodes = "\n  - ".join(f"{{name: n{i}, model: \"NVIDIA H100 80GB HBM3\", gpus: 2}}" for i in range(NODES))
    pods = []
    for i in range(NODES):
        pods.append(f"{{name: long-{i}, namespace: team-{i % 3}, node: n{i}, gpus: 1, start: {START}s, "
                    f"end: {END}s, utilization: 0.6}}")
        end = 50 + i  # a whole scenario second (the API's precision), mid-tick for agents that tick off-second
        pods.append(f"{{name: short-{i}, namespace: team-{(i + 1) % 3}, node: n{i}, gpus: 1, start: {START}s, "
                    f"end: {end}s, utilization: 0.2}}")
    return (f"tick: 1s\nduration: 2h\nprices: {{\"NVIDIA H100 80GB HBM3\": 4.0}}\n"
            f"nodes:\n  - {nodes}\npods:\n  - " + "\n  - ".join(pods) + "\n"
            "events:\n"
            "  - {type: dcgm_down, node: n2, from: 35s, to: 45s}\n"
            "  - {type: podresources_down, node: n3, from: 55s, to: 57s}\n"
            "  - {type: watch_expire, at: 40s}\n"
            "  - {type: watch_expire, at: 60s}\n")


@pytest.mark.slow
@pytest.mark.timeout(180)  # 28 s and more measured on a loaded 2-core machine
def test_chaos_conserves_gpu_seconds(sim_cluster: SimClusterFactory) -> None:
    rng = random.Random(7)
    text = _scenario()
    sim = sim_cluster(text)
    tmp, c = sim.workdir, sim.cluster
    scenario = parse_scenario(text, "chaos.yaml")
    try:
        t0 = (tmp / "ready").stat().st_mtime  # scenario time 0, exactly (sim-cluster sets it)
        # a cap above an agent's restart time under load: a SIGKILLed agent that kept its state resumes
        # and charges the gap to what it sees then (the same pods), instead of booking it unobserved
        agent_env = {f"n{i}": c.agent_env(f"n{i}", GPUCOST_TICK="1s", GPUCOST_MAX_CHARGE_INTERVAL="15s")
                     for i in range(NODES)}
        for node, env in agent_env.items():
            c.spawn(f"agent-{node}", ["agent"], env)
        agg_env = {**c.aggregator_env(), "GPUCOST_TICK": "1s"}
        c.spawn("aggregator", ["aggregator"], agg_env)
        for env in agent_env.values():  # every agent ticks before the first pod starts
            wait(lambda env=env: get(f"http://{env['GPUCOST_LISTEN']}/healthz")[0] == 200, timeout=START - 2)

        def at(t: float) -> None:
            time.sleep(max(0.0, t0 + t - time.time()))

        kills = sorted(rng.uniform(32, 78) for _ in range(4))
        plan = [(k, "aggregator") for k in kills] + [(42.0, "agent-n0"), (53.0, "agent-n1-lose-state")]
        for when, what in sorted(plan):
            at(when)
            if what == "aggregator":
                c.stop("aggregator", signal.SIGKILL)
                c.spawn("aggregator", ["aggregator"], agg_env)
            elif what == "agent-n0":
                c.stop("agent-n0", signal.SIGKILL)
                c.spawn("agent-n0", ["agent"], agent_env["n0"])
            else:
                c.stop("agent-n1", signal.SIGKILL)
                (Path(agent_env["n1"]["GPUCOST_STATE_DIR"]) / "agent-state.json").unlink()
                c.spawn("agent-n1", ["agent"], agent_env["n1"])
        for name in ["aggregator", *(f"agent-{node}" for node in agent_env)]:
            assert c.running(name), name  # every respawn came up and stayed up
        at(END + 4)
        # Freeze the agents' counters (SIGTERM: final tick and state flush; back with a 1 h tick), let the
        # aggregator book them, then stop it gracefully.
        for node, env in agent_env.items():
            assert c.stop(f"agent-{node}") == 0
            c.spawn(f"agent-{node}", ["agent"], {**env, "GPUCOST_TICK": "1h"})
        listen = agg_env["GPUCOST_LISTEN"]
        wait(lambda: get(f"http://{listen}/readyz")[0] == 200)
        for env in agent_env.values():
            wait(lambda env=env: get(f"http://{env['GPUCOST_LISTEN']}/healthz")[0] == 200)
        time.sleep(3)
        agents = {node: usage(env) for node, env in agent_env.items()}
        assert c.stop("aggregator") == 0  # SIGTERM: final tick, flush, exit 0
        conn = sqlite3.connect(agg_env["GPUCOST_LEDGER"])

        def q(sql: str) -> list[tuple[Any, ...]]:  # amounts decoded from SQLite's integer nano-units, as floats
            rows = decoded_rows(conn.execute(sql))
            return [tuple(float(v) if isinstance(v, Decimal) else v for v in r) for r in rows]

        booked: dict[str, float] = dict(q("SELECT node, SUM(allocated_s) FROM usage GROUP BY node"))
        unmeasured: dict[str, float] = dict(q("SELECT node, SUM(unmeasured_s) FROM usage GROUP BY node"))
        unobserved: dict[str, float] = dict(q("SELECT node, SUM(seconds) FROM unobserved GROUP BY node"))
        per_hour: dict[tuple[str, int], float] = {}
        for table, column in (("usage", "allocated_s"), ("unallocated", "seconds"), ("unobserved", "seconds")):
            for node, hour, secs in q(f"SELECT node, hour, SUM({column}) FROM {table} GROUP BY node, hour"):
                per_hour[(node, hour)] = per_hour.get((node, hour), 0.0) + secs
        span = {n: (since, until) for n, since, until in conn.execute("SELECT node, since, booked_ts FROM agents")}
        resets = conn.execute("SELECT COUNT(*) FROM agents").fetchone()[0]
        conn.close()
    finally:
        c.close()

    # Conservation, per node and hour: every second of the node's books is in exactly one bucket.
    for (node, hour), secs in per_hour.items():
        since, until = span[node]
        expected = 2 * max(0.0, min(hour + 3600, until) - max(hour, since))
        assert secs == pytest.approx(expected, abs=1e-6), (node, hour, secs, expected)
    # Exactly once: the ledger holds what the agents counted (n1's first epoch died with its state file).
    for node, snap in agents.items():
        counted = sum(h["allocated_s"] for h in snap["holders"])
        if node == "n1":
            assert booked[node] >= counted - 1e-6
        else:
            assert booked[node] == pytest.approx(counted, abs=1e-6), node

    report = {}
    for i in range(NODES):
        node = f"n{i}"
        exact = sum(((p.end or END) - p.start) * p.gpus for p in scenario.pods if p.node == node)
        got, lost = booked.get(node, 0.0), unobserved.get(node, 0.0)
        report[node] = {"exact_gpu_s": round(exact, 3), "booked_gpu_s": round(got, 3),
                        "error_gpu_s": round(got - exact, 3), "unobserved_gpu_s": round(lost, 3)}
        assert got <= exact + 0.5, (node, report[node])  # never booked twice
        assert got + lost >= exact - 0.5, (node, report[node])  # what is missing was booked as unobserved
    assert unobserved.get("n1", 0.0) > 0.0  # the state-less restart's gap
    assert unmeasured.get("n2", 0.0) >= 2 * 8.0  # 10 s without DCGM on two held GPUs, minus a tick or two
    assert resets == NODES
    kept = [v for n, v in report.items() if n != "n1"]
    total_exact = sum(v["exact_gpu_s"] for v in kept)
    total_error = sum(abs(v["error_gpu_s"]) for v in kept)
    assert total_error / total_exact <= 0.001, report
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "chaos.json").write_text(json.dumps({
        "aggregator_sigkills": kills, "nodes": report, "total_exact_gpu_s": total_exact,
        "total_abs_error_gpu_s": round(total_error, 3), "relative_error": round(total_error / total_exact, 5)},
        indent=2))
