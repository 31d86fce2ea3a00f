"""The per-node costs of a tick and the processes 65,000 nodes need at 5 s a tick, redone by hand."""

from __future__ import annotations

import pytest

from bench.fleet_math import PhaseCosts, per_node, plan, pull_at_cpu_cost

COSTS = PhaseCosts(pull_us=200.0, decode_us=50.0, book_us=250.0, commit_us=300.0, rest_us=100.0)


def test_a_nodes_cost_is_the_sum_of_its_phases() -> None:
    """200 + 50 + 250 + 300 + 100 = 900 us."""
    assert COSTS.total_us == 900.0


def test_65000_nodes_at_5_s_a_tick() -> None:
    """One process: 65,000 x 900 us = 58.5 s. A process fits floor(5,000,000 / 900) = floor(5555.6) = 5,555
    nodes, so ceil(65,000 / 5,555) = ceil(11.70) = 12 processes, each of ceil(65,000 / 12) = 5,417 nodes:
    5,417 x 900 us = 4.8753 s a tick."""
    p = plan(COSTS, nodes=65_000, interval_s=5.0)
    assert p.one_process_tick_s == pytest.approx(58.5)
    assert p.nodes_per_process == 5555
    assert p.processes == 12
    assert p.shard_tick_s == pytest.approx(4.8753)
    assert p.shard_tick_s <= 5.0


def test_a_fleet_that_fits_one_process_needs_one() -> None:
    """2,500 x 900 us = 2.25 s <= 5 s: one process."""
    assert plan(COSTS, nodes=2500, interval_s=5.0).processes == 1


def test_a_node_costing_more_than_the_interval_still_gets_a_process() -> None:
    """6 s a node: a process fits floor(5 / 6) = 0, taken as 1: 3 nodes need 3 processes."""
    slow = PhaseCosts(pull_us=6e6, decode_us=0.0, book_us=0.0, commit_us=0.0, rest_us=0.0)
    assert plan(slow, nodes=3, interval_s=5.0).processes == 3


def test_costs_must_be_positive() -> None:
    zero = PhaseCosts(pull_us=0.0, decode_us=0.0, book_us=0.0, commit_us=0.0, rest_us=0.0)
    with pytest.raises(ValueError, match="positive"):
        plan(zero, nodes=1, interval_s=5.0)


def test_phase_seconds_become_microseconds_per_node() -> None:
    """2,500 nodes: 1e6 / 2,500 = 400 us per second of phase. Pull 0.5 s -> 200 us, decode 0.125 -> 50,
    book 0.625 -> 250, commit 0.75 -> 300; the rest is 2.5 - (0.5 + 0.125 + 0.625 + 0.75) = 0.5 s -> 200 us."""
    c = per_node({"pull": 0.5, "decode": 0.125, "book": 0.625, "commit": 0.75, "tick": 2.5}, nodes=2500)
    assert (c.pull_us, c.decode_us, c.book_us, c.commit_us) == pytest.approx((200.0, 50.0, 250.0, 300.0))
    assert c.rest_us == pytest.approx(200.0)


def test_the_pull_at_its_cpu_cost_shortens_the_tick_by_the_wait() -> None:
    """Pull 0.5 s of wall time, 0.2 s of CPU: 0.3 s waited, so the tick 2.5 - 0.3 = 2.2 s; the rest (2.2 - 0.2 -
    0.125 - 0.625 - 0.75 = 0.5 s) is unchanged: 200 us a node at 2,500 nodes; the pull 0.2 s -> 80 us."""
    phases = {"pull": 0.5, "pull_cpu": 0.2, "decode": 0.125, "book": 0.625, "commit": 0.75, "tick": 2.5}
    cpu = pull_at_cpu_cost(phases)
    assert cpu["pull"] == 0.2
    assert cpu["tick"] == pytest.approx(2.2)
    c = per_node(cpu, nodes=2500)
    assert c.pull_us == pytest.approx(80.0)
    assert c.rest_us == pytest.approx(200.0)
