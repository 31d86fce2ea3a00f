"""Many clusters, one PostgreSQL ledger: two simulated clusters' aggregators write the same database, and
the report by cluster,namespace equals what each cluster books alone into its own SQLite ledger."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from exporter.aggregator.ledger.report import build_report
from exporter.aggregator.ledger.sqlite import decoded_rows
from exporter.pipeline import run_simulation
from exporter.sim.scenario import parse_scenario
from tests.pg import PgServer, postgres_fixture

_FIXTURES = (postgres_fixture,)  # used by name
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]  # 81 s measured on a loaded 2-core machine

EAST = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: h100, model: "NVIDIA H100 80GB HBM3", gpus: 2, labels: {gpu.platform/pool: train}}]
pods:
  - {name: a, namespace: team-a, node: h100, gpus: 1, utilization: [{at: 0m, value: 0.8}, {at: 30m, value: 0.2}]}
  - {name: b, namespace: team-b, node: h100, gpus: 1, start: 30m, utilization: 0.5}
"""
WEST = """
tick: 15s
duration: 30m
prices: {"NVIDIA L4": 0.8}
nodes: [{name: l4, model: "NVIDIA L4", gpus: 4, labels: {gpu.platform/pool: dev}}]
pods:
  - {name: n, namespace: team-a, node: l4, gpus: 2, utilization: 0.25}
"""
FIELDS = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cost", "idle_cost")


def _by(rows: list[dict[str, Any]], *cols: str) -> dict[tuple[Any, ...], tuple[float, ...]]:
    return {tuple(r[c] for c in cols): tuple(round(float(r[f]), 6) for f in FIELDS) for r in rows}


async def _alone(text: str, tmp_path: Path, name: str) -> dict[tuple[Any, ...], tuple[float, ...]]:
    ledger = tmp_path / f"{name}.db"
    with tempfile.TemporaryDirectory(prefix="gce-") as work:
        await run_simulation(parse_scenario(text, f"{name}.yaml"), ledger, workdir=Path(work))
    conn = sqlite3.connect(ledger)
    rows = build_report(lambda sql, p: decoded_rows(conn.execute(sql, tuple(p))), "namespace", since=None, until=None)
    conn.close()
    return _by(rows, "namespace")


async def test_two_clusters_in_one_database_report_as_each_alone(postgres: PgServer, tmp_path: Path) -> None:
    """By hand (east): team-a 1 GPU-h, cost 4.00; team-b 0.5 GPU-h, cost 2.00; unallocated 0.5 GPU-h, 2.00.
    West: team-a 2 GPUs x 0.5 h = 1 GPU-h, used 0.25, cost 0.80; unallocated 2 x 0.5 = 1 GPU-h, 0.80.
    team-a appears in both clusters and is never summed across them."""
    url = postgres.database()
    for name, text in (("east", EAST), ("west", WEST)):
        with tempfile.TemporaryDirectory(prefix="gce-") as work:
            await run_simulation(parse_scenario(text, f"{name}.yaml"), url, workdir=Path(work),
                                 aggregator_extra={"cluster": name, "ledger_password_file": postgres.password_file})
    from exporter.aggregator.ledger.store import open_reader

    with open_reader(url, password_file=postgres.password_file) as query:
        shared = _by(build_report(query, "cluster,namespace", since=None, until=None), "cluster", "namespace")
    for name, text in (("east", EAST), ("west", WEST)):
        alone = await _alone(text, tmp_path, name)
        mine = {(ns,): v for (cl, ns), v in shared.items() if cl == name}
        assert mine == alone, name
    assert shared[("east", "team-a")][0] == pytest.approx(1.0) and shared[("east", "team-a")][3] == pytest.approx(4.0)
    assert shared[("west", "team-a")] == pytest.approx((1.0, 0.25, 0.75, 0.8, 0.6))
    assert shared[("west", "__unallocated__")] == pytest.approx((0.0, 0.0, 1.0, 0.8, 0.8))  # idle hours, priced
