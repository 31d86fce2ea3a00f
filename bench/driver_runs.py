"""Run ``bench.tick_driver`` for one tree in a fresh process and read its figures back."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.interleave import steady_tick
from bench.old_tree import Tree


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverRun:
    """One aggregator process's ticks: their seconds, phases (when timed) and memory."""

    tree: str
    exporter: str  # the ``exporter/__init__.py`` the process imported: which code was timed
    nodes: int
    agents_up: int
    times: list[float]
    phases: list[dict[str, float]]
    rss_after_start_mb: float
    rss_mb: float
    peak_rss_mb: float

    @property
    def tick_s(self) -> float:
        """The run's steady tick: the median of the ticks after the first."""
        return steady_tick(self.times)

    def mean_phases(self) -> dict[str, float]:
        """Each phase's mean seconds over the ticks after the first (all ticks if there is one)."""
        steady = self.phases[1:] or self.phases
        if not steady:
            raise ValueError("this run did not time its phases")
        return {k: sum(p[k] for p in steady) / len(steady) for k in steady[0]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """Where a run books: a SQLite file or a PostgreSQL database (with its password file)."""

    target: str
    password_file: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Shard:
    """Which shard of how many a run is (1 of 1: not sharded)."""

    count: int = 1
    index: int = 0


def run_driver(tree: Tree, *, agents: str, nodes: int, ticks: int, ledger: Ledger, cwd: Path,
               shard: Shard | None = None, phases: bool = False) -> DriverRun:
    """``tree``'s aggregator for ``nodes`` agents of the prefix ``agents``; ``cwd`` keeps the current directory
    off ``sys.path`` (``-m`` puts it first, which would shadow the tree on ``PYTHONPATH``)."""
    shard = shard or Shard()
    cmd = [tree.python, "-m", "bench.tick_driver", "--agents", agents, "--nodes", str(nodes), "--ticks", str(ticks),
           "--ledger", ledger.target, "--shards", str(shard.count), "--shard-index", str(shard.index)]
    if ledger.password_file is not None:
        cmd += ["--password-file", str(ledger.password_file)]
    if phases:
        cmd.append("--phases")
    proc = subprocess.run(cmd, env=tree.env(), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree.label}: tick driver failed: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    run = DriverRun(tree=tree.label, exporter=out["exporter"], nodes=nodes, agents_up=out["agents_up"],
                    times=out["times"], phases=out["phases"], rss_after_start_mb=out["rss_after_start_mb"],
                    rss_mb=out["rss_mb"], peak_rss_mb=out["peak_rss_mb"])
    if shard.count == 1 and run.agents_up != nodes:  # a tick that pulled nothing would be fast and meaningless
        raise RuntimeError(f"{tree.label}: {run.agents_up} of {nodes} agents up after the last tick")
    return run
