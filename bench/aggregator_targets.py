"""Issue 28's aggregator targets, each aggregator in a fresh process against one set of simulated agents:
the tick at the large size (≤ 5 s) and its peak memory (≤ 600 MB), the small size against commit 41fc094
timed in the same run (≤ 0.5 x, old/new/new/old, best of each), on SQLite and PostgreSQL, and the large size
in shards sharing one PostgreSQL ledger (the slowest shard ≤ 5 s)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.agents_peer import agents_peer
from bench.driver_runs import DriverRun, Ledger, Shard, run_driver
from bench.fleet_math import PhaseCosts, per_node, pull_at_cpu_cost
from bench.interleave import abba, best
from bench.old_tree import Tree, build_old, this_checkout
from bench.targets import Rule, Target

OLD_COMMIT = "41fc094"
TICK_LIMIT_S = 5.0
RSS_LIMIT_MB = 600.0
VS_OLD_LIMIT = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class AggSizes:
    """Nodes (8 GPUs each) at the compared and at the large size, ticks per process, ABBA blocks, shards."""

    small: int
    large: int
    ticks: int
    rounds: int
    shards: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """What every run of one backend shares: the trees, the agents, a fresh ledger per call, a scratch dir."""

    trees: dict[str, Tree]
    agents: str
    fresh: Callable[[], Ledger]
    cwd: Path


def interleaved(setup: Setup, *, nodes: int, sizes: AggSizes) -> dict[str, Any]:
    """Old and new at ``nodes`` in ABBA order, each run with a fresh ledger; the best steady tick of each."""
    runs: dict[str, list[float]] = {"old": [], "new": []}
    code: dict[str, str] = {}
    order = abba("old", "new", rounds=sizes.rounds)
    for side in order:
        run = run_driver(setup.trees[side], agents=setup.agents, nodes=nodes, ticks=sizes.ticks,
                         ledger=setup.fresh(), cwd=setup.cwd)
        runs[side].append(round(run.tick_s, 4))
        code[side] = run.exporter
    return {"nodes": nodes, "order": order, "exporter_timed": code, "old_tick_s": runs["old"],
            "new_tick_s": runs["new"], "best_old_s": best(runs["old"]), "best_new_s": best(runs["new"])}


def _large_entry(run: DriverRun) -> dict[str, Any]:
    phases = run.mean_phases()
    return {"nodes": run.nodes, "ticks_s": [round(t, 4) for t in run.times], "tick_s": round(run.tick_s, 4),
            "rss_after_start_mb": run.rss_after_start_mb, "rss_mb": run.rss_mb, "peak_rss_mb": run.peak_rss_mb,
            "phases_s": {k: round(v, 4) for k, v in phases.items()},
            "per_node_us": _rounded(per_node(phases, nodes=run.nodes)),
            "per_node_cpu_us": _rounded(per_node(pull_at_cpu_cost(phases), nodes=run.nodes))}


def _rounded(costs: PhaseCosts) -> dict[str, float]:
    return {k: round(v, 1) for k, v in asdict(costs).items()}


def backend_targets(backend: str, setup: Setup, *, sizes: AggSizes) -> tuple[list[Target], dict[str, Any]]:
    """The three targets of one backend and the figures they come from."""
    compared = interleaved(setup, nodes=sizes.small, sizes=sizes)
    large = run_driver(setup.trees["new"], agents=setup.agents, nodes=sizes.large, ticks=sizes.ticks,
                       ledger=setup.fresh(), cwd=setup.cwd, phases=True)
    linear = compared["best_new_s"] * sizes.large / sizes.small
    targets = [
        Target(name=f"aggregator_tick_{sizes.large}_nodes_{backend}", value=large.tick_s, unit="s",
               baseline=linear, baseline_is=f"this code's best {sizes.small}-node tick scaled linearly",
               limit=TICK_LIMIT_S, rule=Rule.VALUE_AT_MOST),
        Target(name=f"aggregator_peak_rss_{sizes.large}_nodes_{backend}", value=large.peak_rss_mb, unit="MB",
               baseline=large.rss_after_start_mb, baseline_is="the same process after start, before its first tick",
               limit=RSS_LIMIT_MB, rule=Rule.VALUE_AT_MOST),
        Target(name=f"aggregator_tick_{sizes.small}_nodes_{backend}_vs_{OLD_COMMIT}", value=compared["best_new_s"],
               unit="s", baseline=compared["best_old_s"], baseline_is=f"commit {OLD_COMMIT}, best of its runs",
               limit=VS_OLD_LIMIT, rule=Rule.RATIO_AT_MOST)]
    return targets, {"compared": compared, "large": _large_entry(large)}


def sharded_target(setup: Setup, sizes: AggSizes, *, unsharded_s: float) -> tuple[Target, dict[str, Any]]:
    """The large size in ``sizes.shards`` shards sharing one ledger, one after another (each on its own core in
    production): the slowest shard's steady tick bounds the tick interval."""
    ledger = setup.fresh()
    per_shard = [run_driver(setup.trees["new"], agents=setup.agents, nodes=sizes.large, ticks=sizes.ticks,
                            ledger=ledger, cwd=setup.cwd, shard=Shard(count=sizes.shards, index=i)).tick_s
                 for i in range(sizes.shards)]
    target = Target(name=f"aggregator_tick_{sizes.large}_nodes_postgres_{sizes.shards}_shards_slowest",
                    value=max(per_shard), unit="s", baseline=unsharded_s,
                    baseline_is=f"the same {sizes.large} nodes in one unsharded process",
                    limit=TICK_LIMIT_S, rule=Rule.VALUE_AT_MOST)
    return target, {"tick_s_per_shard": [round(t, 4) for t in per_shard]}


@contextmanager
def _postgres() -> Iterator[Any]:
    """A real PostgreSQL server (``tests/pg.py``), or None when its binaries are not installed."""
    from tests.pg import PG_BIN, start_server

    if not (PG_BIN / "initdb").exists():
        yield None
        return
    server = start_server()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def aggregator_targets(repo: Path, sizes: AggSizes) -> tuple[list[Target], dict[str, Any]]:
    """Every aggregator target on SQLite, then on PostgreSQL (skipped, and said so, without a server)."""
    targets: list[Target] = []
    raw: dict[str, Any] = {"sizes": asdict(sizes), "old_commit": OLD_COMMIT}
    with tempfile.TemporaryDirectory(prefix="gce-bench-") as tmp_name, agents_peer() as agents, \
            _postgres() as server:
        tmp = Path(tmp_name)
        trees = {"old": build_old(repo, OLD_COMMIT, into=tmp / "old"), "new": this_checkout(repo)}
        files = iter(range(10**6))
        sqlite = Setup(trees=trees, agents=agents, cwd=tmp,
                       fresh=lambda: Ledger(target=str(tmp / f"ledger-{next(files)}.db")))
        found, raw["sqlite"] = backend_targets("sqlite", sqlite, sizes=sizes)
        targets += found
        if server is None:
            raw["postgres"] = "skipped: no PostgreSQL server binaries"
            return targets, raw
        pg = Setup(trees=trees, agents=agents, cwd=tmp,
                   fresh=lambda: Ledger(target=server.database(), password_file=server.password_file))
        found, raw["postgres"] = backend_targets("postgres", pg, sizes=sizes)
        targets += found
        shard_target, raw["postgres_shards"] = sharded_target(pg, sizes,
                                                              unsharded_s=raw["postgres"]["large"]["tick_s"])
        targets.append(shard_target)
    return targets, raw
