"""How many aggregator processes a fleet needs at a tick interval, redone from the per-node phase costs.

Every phase of a tick (pull, decode, book, commit, the rest) is one core's Python, so its cost grows with the
nodes a process owns: a process fits ``interval / per-node cost`` nodes, and a fleet needs as many processes
(shards, each on its own core) as that many nodes go into it, rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseCosts:
    """Microseconds per node per tick, by phase (``rest``: the tick minus the four timed phases)."""

    pull_us: float
    decode_us: float
    book_us: float
    commit_us: float
    rest_us: float

    @property
    def total_us(self) -> float:
        """A node's whole cost per tick."""
        return self.pull_us + self.decode_us + self.book_us + self.commit_us + self.rest_us


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetPlan:
    """The arithmetic for ``nodes`` nodes at ``interval_s`` a tick."""

    nodes: int
    interval_s: float
    one_process_tick_s: float
    nodes_per_process: int
    processes: int
    shard_tick_s: float


def plan(costs: PhaseCosts, *, nodes: int, interval_s: float) -> FleetPlan:
    """One process would tick ``nodes * total`` us; a process fits ``floor(interval / total)`` nodes, so
    ``ceil(nodes / that)`` processes; each shard then ticks its ``ceil(nodes / processes)`` nodes."""
    if costs.total_us <= 0 or nodes < 1 or interval_s <= 0:
        raise ValueError("costs, nodes and interval must be positive")
    per_process = max(1, math.floor(interval_s * 1e6 / costs.total_us))
    processes = math.ceil(nodes / per_process)
    return FleetPlan(nodes=nodes, interval_s=interval_s, one_process_tick_s=nodes * costs.total_us / 1e6,
                     nodes_per_process=per_process, processes=processes,
                     shard_tick_s=math.ceil(nodes / processes) * costs.total_us / 1e6)


def pull_at_cpu_cost(phase_s: dict[str, float]) -> dict[str, float]:
    """The phases with the pull at this process's CPU time instead of its wall time (the tick shortened by the
    difference): what the aggregator itself spends when its agents run elsewhere, not on the cores it measures
    on."""
    waited = phase_s["pull"] - phase_s["pull_cpu"]
    return phase_s | {"pull": phase_s["pull_cpu"], "tick": phase_s["tick"] - waited}


def per_node(phase_s: dict[str, float], *, nodes: int) -> PhaseCosts:
    """Phase seconds of one tick over ``nodes`` nodes -> us per node (``tick`` is the whole tick)."""
    timed = phase_s["pull"] + phase_s["decode"] + phase_s["book"] + phase_s["commit"]
    scale = 1e6 / nodes
    return PhaseCosts(pull_us=phase_s["pull"] * scale, decode_us=phase_s["decode"] * scale,
                      book_us=phase_s["book"] * scale, commit_us=phase_s["commit"] * scale,
                      rest_us=max(0.0, phase_s["tick"] - timed) * scale)
