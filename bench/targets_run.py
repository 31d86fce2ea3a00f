"""``bench/run.py --targets``: every target of issue 28 beside its baseline from the same run, the raw figures
they come from, the per-node phase costs of a tick and the 65,000-node arithmetic redone from them."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.aggregator_targets import AggSizes, aggregator_targets
from bench.fleet_math import PhaseCosts, plan
from bench.targets import Rule, Target

FLEET_NODES = 65_000
FLEET_INTERVAL_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """How big each benchmark runs (``--quick``: smaller, for a fast check; the targets stay the same)."""

    aggregator: AggSizes
    focus_nodes: int
    agent_rss_ticks: int
    agent_tick_repeat: int
    render_repeat: int


FULL = Sizes(aggregator=AggSizes(small=2500, large=10_000, ticks=4, rounds=1, shards=4), focus_nodes=500,
             agent_rss_ticks=1000, agent_tick_repeat=200, render_repeat=15)
QUICK = Sizes(aggregator=AggSizes(small=250, large=1000, ticks=3, rounds=1, shards=4), focus_nodes=50,
              agent_rss_ticks=300, agent_tick_repeat=50, render_repeat=5)


def render_target(repeat: int) -> tuple[Target, dict[str, Any]]:
    """/metrics for 20,000 pods against prometheus-client's exposition of the same families: ≤ 0.3."""
    from bench.run import bench_metrics_render

    r = bench_metrics_render(repeat)
    return (Target(name="metrics_render_20000_pods", value=r["ms"], unit="ms", baseline=r["baseline_ms"],
                   baseline_is="prometheus-client generate_latest of the same families", limit=0.3,
                   rule=Rule.RATIO_AT_MOST), r)


def focus_targets(nodes: int) -> tuple[list[Target], dict[str, Any]]:
    """FOCUS rows per CPU-second against the plain csv dump's (≥ 0.4), and a month's peak memory against a
    day's (≤ 1.5)."""
    from bench.run import bench_focus_export

    f = bench_focus_export(nodes)
    return [Target(name="focus_export_rows_per_cpu_s", value=f["1d"]["focus_rows_per_cpu_s"], unit="rows/CPU-s",
                   baseline=f["1d"]["stdlib_csv_rows_per_cpu_s"], baseline_is="csv.writer dump of the same rows",
                   limit=0.4, rule=Rule.RATIO_AT_LEAST),
            Target(name="focus_export_peak_memory_month", value=f["30d"]["focus_peak_mb"], unit="MB",
                   baseline=f["1d"]["focus_peak_mb"], baseline_is="the same export of one day", limit=1.5,
                   rule=Rule.RATIO_AT_MOST)], f


def agent_targets(sizes: Sizes) -> tuple[list[Target], dict[str, Any]]:
    """The agent's tick against prometheus-client parsing the same payload (≤ 0.1), and its memory (≤ 60 MB)."""
    from bench.run import bare_rss_mb, bench_agent_rss, bench_agent_tick

    tick = bench_agent_tick(False, sizes.agent_tick_repeat)
    rss = bench_agent_rss(sizes.agent_rss_ticks)
    bare = bare_rss_mb()
    return [Target(name="agent_tick", value=tick["tick_ms"], unit="ms", baseline=tick["baseline_parse_ms"],
                   baseline_is="prometheus-client text_string_to_metric_families of the same payload", limit=0.1,
                   rule=Rule.RATIO_AT_MOST),
            Target(name="agent_rss", value=rss["rss_at_end"], unit="MB", baseline=bare,
                   baseline_is="a bare interpreter with asyncio and aiohttp imported", limit=60.0,
                   rule=Rule.VALUE_AT_MOST)], {"tick": tick, "rss": rss, "bare_rss_mb": bare,
                                               "rss_ticks": sizes.agent_rss_ticks}


def _plan(per_node_us: dict[str, float]) -> dict[str, Any]:
    costs = PhaseCosts(**per_node_us)
    p = plan(costs, nodes=FLEET_NODES, interval_s=FLEET_INTERVAL_S)
    return {"per_node_us": asdict(costs) | {"total_us": round(costs.total_us, 1)},
            "plan": {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(p).items()}}


def fleet(aggregator: dict[str, Any]) -> dict[str, Any]:
    """The 65,000-node arithmetic from the large run's per-node costs (PostgreSQL: the ledger shards share), as
    measured (the pull's wall time, which here includes the simulated agents on the same cores) and with the
    pull at the aggregator's own CPU time."""
    backend = "postgres" if isinstance(aggregator.get("postgres"), dict) else "sqlite"
    large = aggregator[backend]["large"]
    return {"from": f"{backend}, {large['nodes']} nodes in one process", "as_measured": _plan(large["per_node_us"]),
            "pull_at_cpu_cost": _plan(large["per_node_cpu_us"])}


def run_targets(repo: Path, *, sizes: Sizes) -> dict[str, Any]:
    """Run every target's benchmark once and return the JSON ``bench/run.py --targets`` prints."""
    started, load = time.time(), os.getloadavg()
    agg_targets, aggregator = aggregator_targets(repo, sizes.aggregator)
    render, render_raw = render_target(sizes.render_repeat)
    focus, focus_raw = focus_targets(sizes.focus_nodes)
    agent, agent_raw = agent_targets(sizes)
    targets = [*agg_targets, render, *focus, *agent]
    return {"targets": [t.entry() for t in targets], "all_met": all(t.met for t in targets),
            "sizes": asdict(sizes), "aggregator": aggregator, "metrics_render": render_raw, "focus_export": focus_raw,
            "agent": agent_raw, "fleet_65000_nodes_at_5_s": fleet(aggregator),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_average_at_start": load, "load_average_at_end": os.getloadavg()},
            "wall_seconds": round(time.time() - started, 1)}
