"""Who acts, and how: only the leader holds a spent budget's queue, and a dry run only says it would (on the
simulator, agents and aggregator over real HTTP, virtual time).

train holds 2 H100 from minute 0; its budget is 0.05 GPU-h, spent at 2 GPUs x 90 s = 0.05 GPU-h (minute 1:30)."""

from __future__ import annotations

from pathlib import Path

from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario

START = 1_799_013_600.0  # Sunday 2027-01-03 22:00:00 UTC
SCENARIO = """
tick: 15s
duration: 10m
prices: {"NVIDIA H100 80GB HBM3": 4.00}
nodes: [{name: n, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
namespaces: [{name: team-a}]
queues: [{kind: kueue, name: gpu, gpus: 2, local_queues: [{namespace: team-a, name: train}]}]
pods: [{name: t0, namespace: team-a, node: n, gpus: 2, queue: train}]
budgets:
  - {name: tiny, target: {kueue_local_queue: team-a/train}, gpu_hours: 0.05, window: day, action: hold}
"""


def _stop(pipe: Pipeline) -> str:
    return str(pipe.peers.cluster.store.objects["localqueues"][("team-a", "train")]["spec"]["stopPolicy"])


async def test_only_the_leader_holds(tmp_path: Path) -> None:
    """A standby (not leading) works the budget out (spent) but leaves the queue alone; once it leads, it holds
    it within that tick."""
    pipe = Pipeline(parse_scenario(SCENARIO, "modes.yaml"), tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    agg.is_leader = False  # a standby: another replica holds the Lease
    try:
        for k in range(0, 9):  # to minute 2: 2 x 120 s = 0.0667 GPU-h spent
            await pipe.step(k * 15)
        assert agg.budget_control.states[0].spent
        assert _stop(pipe) == "None"
        agg.is_leader = True
        await pipe.step(9 * 15)
        assert _stop(pipe) == "Hold"
    finally:
        await pipe.close()


async def test_dry_run_says_what_it_would_do(tmp_path: Path) -> None:
    """With budget_dry_run the spent budget is counted once as ``hold-dry-run`` and nothing is patched: no stop
    policy, no annotation, no Event."""
    pipe = Pipeline(parse_scenario(SCENARIO, "modes.yaml"), tmp_path / "w", clock=VirtualClock(START),
                    aggregator_extra={"budget_dry_run": True})
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(0, 13):  # to minute 3, well past spent
            await pipe.step(k * 15)
        lq = pipe.peers.cluster.store.objects["localqueues"][("team-a", "train")]
        assert _stop(pipe) == "None"
        assert "annotations" not in lq["metadata"]
        assert dict(agg.budget_control.actions) == {("tiny", "hold-dry-run"): 1}
        assert not [e for e in pipe.peers.cluster.store.objects["events"].values() if e["reason"] == "BudgetSpent"]
    finally:
        await pipe.close()


async def test_a_hold_whose_budget_is_removed_is_released(tmp_path: Path) -> None:
    """The ledger remembers what a hold held: a budget deleted from the file while holding its queue releases it on
    the next tick (counted as a release), rather than leaving the queue held for good."""
    pipe = Pipeline(parse_scenario(SCENARIO, "modes.yaml"), tmp_path / "w", clock=VirtualClock(START))
    await pipe.start()
    agg = pipe.aggregator
    assert agg is not None and pipe.peers.budgets_file is not None
    try:
        for k in range(0, 9):
            await pipe.step(k * 15)
        assert _stop(pipe) == "Hold"
        assert await agg.ledger.query("SELECT budget, target FROM budget_holds") == [("tiny", "team-a/train")]
        pipe.peers.budgets_file.write_text("budgets: []\n")
        await pipe.step(9 * 15)
        assert _stop(pipe) == "None"
        assert agg.budget_control.actions[("tiny", "release")] == 1
        assert await agg.ledger.query("SELECT budget FROM budget_holds") == []
    finally:
        await pipe.close()
