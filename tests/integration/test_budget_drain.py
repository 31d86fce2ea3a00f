"""A budget that drains, end to end on the simulator (agents, aggregator, the simulated API over HTTP), in virtual time
from Sunday 2027-01-03 22:00 UTC, so the calendar week rolls over at minute 120; ticks of 60 s.

Kueue LocalQueue team-a/train, weekly budget 3.8 GPU-hours, ``action: drain``: train-0 and train-1 (Jobs train-a and
train-b) hold 2 H100 each, so 4 GPUs x 57/60 h = 3.8 GPU-h are spent at minute 57 (off the 5-minute refresh of
budgets that do not act) and the aggregator sets the LocalQueue's stopPolicy to ``HoldAndDrain`` in that tick. The
simulated Kueue evicts the queue's admitted Workloads at its next tick (minute 58, reason ``LocalQueueStopped``): both
pods stop and are charged no more. dev-0, in LocalQueue dev of the same ClusterQueue, runs on. At the next week
(minute 120) the hold is released; at minute 121 the Jobs' new pods start with the run time their first ones had left
(110 - 58 = 52 minutes), so they end at minute 173.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario
from tests.integration.test_golden import close

START = 1_799_013_600.0  # Sunday 2027-01-03 22:00:00 UTC: the week rolls over 2 h later
SCENARIO = """
tick: 60s
duration: 3h
prices: {"NVIDIA H100 80GB HBM3": 4.00}
nodes: [{name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 8}]
namespaces: [{name: team-a}]
queues:
  - {kind: kueue, name: gpu, gpus: 8, local_queues: [{namespace: team-a, name: train}, {namespace: team-a, name: dev}]}
pods:
  - {name: train-0, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 110m,
     owner: {kind: Job, name: train-a}}
  - {name: train-1, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 110m,
     owner: {kind: Job, name: train-b}}
  - {name: dev-0, namespace: team-a, node: n-h100, gpus: 1, queue: dev, end: 100m}
budgets:
  - {name: train-weekly, target: {kueue_local_queue: team-a/train}, gpu_hours: 3.8, window: week, action: drain}
"""


def _obj(pipe: Pipeline, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    obj: dict[str, Any] | None = pipe.peers.cluster.store.objects[kind].get((ns, name))
    return obj


def _stop(pipe: Pipeline) -> str:
    lq = _obj(pipe, "localqueues", "team-a", "train")
    assert lq is not None
    return str(lq["spec"]["stopPolicy"])


def _phases(pipe: Pipeline) -> dict[str, str]:
    return {name: str(p["status"]["phase"]) for (ns, name), p in pipe.peers.cluster.store.objects["pods"].items()
            if ns == "team-a"}


def _conditions(pipe: Pipeline, workload: str) -> dict[str, tuple[str, str]]:
    wl = _obj(pipe, "workloads", "team-a", workload)
    assert wl is not None
    return {c["type"]: (c["status"], c["reason"]) for c in (wl.get("status") or {}).get("conditions") or []}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Drive the scenario minute by minute, noting what the cluster looked like at the moments the test names."""

    async def drive() -> dict[str, Any]:
        work = tmp_path_factory.mktemp("budget-drain")
        pipe = Pipeline(parse_scenario(SCENARIO, "drain.yaml"), work, clock=VirtualClock(START))
        await pipe.start()
        agg = pipe.aggregator
        assert agg is not None
        seen: dict[str, Any] = {}
        try:
            for minute in range(0, 181):
                await pipe.step(minute * 60.0)
                if minute in (56, 57, 58, 119, 120, 121):
                    seen[f"m{minute}"] = {"stop": _stop(pipe), "pods": _phases(pipe)}
                if minute == 57:
                    lq = _obj(pipe, "localqueues", "team-a", "train")
                    assert lq is not None
                    seen["annotations"] = dict(lq["metadata"].get("annotations") or {})
                if minute == 58:
                    seen["evicted"] = _conditions(pipe, "job-train-a")
                    seen["evicted_admission"] = (_obj(pipe, "workloads", "team-a", "job-train-a") or {})[
                        "status"].get("admission")
                if minute == 100:
                    seen["books_100"] = {r["pod"]: r for r in await agg.ledger.run_report("pod", since=None,
                                                                                          until=None)}
                    state = next(s for s in agg.budget_control.states if s.budget.name == "train-weekly")
                    seen["spent_100"] = state.spent_gpu_hours
                if minute == 121:
                    seen["readmitted"] = _conditions(pipe, "job-train-a")
            seen["events"] = [(e["reason"], e["message"]) for e in pipe.peers.cluster.store.objects["events"].values()
                              if e["involvedObject"].get("kind") == "LocalQueue"]
            seen["actions"] = dict(agg.budget_control.actions)
            seen["books"] = {r["pod"]: r for r in await agg.ledger.run_report("pod", since=None, until=None)}
        finally:
            await pipe.close()
        return seen

    return asyncio.run(drive())


def test_a_spent_drain_budget_sets_hold_and_drain(run: dict[str, Any]) -> None:
    """At minute 56 train has spent 4 x 56/60 = 3.733 GPU-h of 3.8: the queue runs; at minute 57, 4 x 57/60 = 3.8
    GPU-h: within that tick the LocalQueue's stopPolicy is HoldAndDrain (the budget says drain), annotated, and an
    Event says why."""
    assert run["m56"]["stop"] == "None"
    assert run["m57"]["stop"] == "HoldAndDrain"
    assert run["annotations"] == {"gpu.platform/held-by-budget": "train-weekly"}
    spent = [m for reason, m in run["events"] if reason == "BudgetSpent"]
    assert len(spent) == 1 and "3.800000000 GPU-h / 3.8 GPU-h" in spent[0] and "HoldAndDrain" in spent[0]
    assert run["actions"][("train-weekly", "drain")] == 1
    assert ("train-weekly", "hold") not in run["actions"]


def test_the_simulated_kueue_evicts_the_queues_admitted_workloads(run: dict[str, Any]) -> None:
    """In the tick the hold is set the pods still run (Kueue acts on what it sees next); at minute 58 train-0 and
    train-1 are gone and their Workloads evicted as Kueue does (Evicted/LocalQueueStopped, no admission, requeue
    waiting for the queue); dev-0, in another LocalQueue of the same ClusterQueue, runs on."""
    assert run["m57"]["pods"] == {"train-0": "Running", "train-1": "Running", "dev-0": "Running"}
    assert run["m58"]["pods"] == {"dev-0": "Running"}
    assert run["evicted"]["Evicted"] == ("True", "LocalQueueStopped")
    assert run["evicted"]["Requeued"] == ("False", "LocalQueueStopped")
    assert run["evicted_admission"] is None


def test_drained_pods_stop_being_charged(run: dict[str, Any]) -> None:
    """At minute 100 train-0 and train-1 are charged to minute 58 only: 2 GPUs x 58/60 h = 1.9333 GPU-h, x 4.00 =
    7.73 each (not 2 x 100/60 = 3.333); the budget's spent stays at 2 x 1.9333 = 3.8667 GPU-h. dev-0 is charged its
    whole 100 minutes: 1 x 100/60 = 1.667 GPU-h."""
    books = run["books_100"]
    for pod in ("train-0", "train-1"):
        close(books[pod]["allocated_gpu_hours"], 2 * 58 / 60)
        close(books[pod]["cost"], 2 * 58 / 60 * 4.00)
    close(books["dev-0"]["allocated_gpu_hours"], 1 * 100 / 60)
    close(run["spent_100"], 2 * 2 * 58 / 60)


def test_next_week_releases_and_the_jobs_run_again(run: dict[str, Any]) -> None:
    """At minute 120 the week rolls over (0 of 3.8 GPU-h spent): stopPolicy None; at minute 121 each Job's new pod
    runs, its Workload admitted again, for the 110 - 58 = 52 minutes left: 2 GPUs x 52/60 h = 1.7333 GPU-h, x 4.00 =
    6.93."""
    assert run["m119"]["stop"] == "HoldAndDrain"
    assert run["m120"]["stop"] == "None"
    assert set(run["m120"]["pods"]) == set()  # dev-0 ended at minute 100; the Jobs' new pods wait for Kueue's next tick
    new = sorted(run["m121"]["pods"])
    assert [n.rsplit("-", 1)[0] for n in new] == ["train-a", "train-b"]
    assert set(run["m121"]["pods"].values()) == {"Running"}
    assert "Evicted" not in run["readmitted"]
    assert run["actions"][("train-weekly", "release")] == 1
    books = run["books"]
    for pod in new:
        close(books[pod]["allocated_gpu_hours"], 2 * 52 / 60)
        close(books[pod]["cost"], 2 * 52 / 60 * 4.00)
    for pod in ("train-0", "train-1"):  # nothing more after the drain
        close(books[pod]["allocated_gpu_hours"], 2 * 58 / 60)
