"""Budgets that act, end to end on the simulator (agents, aggregator, the simulated API over HTTP), in virtual time
from Sunday 2027-01-03 22:00 UTC, so the calendar week rolls over at minute 120.

* Kueue LocalQueue team-a/train, weekly budget 4 GPU-hours, ``action: hold``: train-0 and train-1 hold 2 H100 each,
  so 4 GPUs x 1 h = 4 GPU-h are spent at minute 60; the LocalQueue is held within that tick; train-2, submitted at
  minute 70, stays Pending; train-0/1 keep running and being charged; at the next week (minute 120) the hold is
  released and train-2 starts.
* Volcano queue research, monthly budget 10.00 at 2.50/h A100s: r0 holds 4 A100s, 4 x 2.50 = 10.00 per hour, so
  4 GPU-h = 10.00 are spent at minute 60 and the queue is closed (Command CloseQueue); the budget is raised to 20.00 at
  minute 80 (spent then 4 x 80/60 x 2.50 = 13.33, below 20.00) and the queue is reopened.
* LocalQueue team-a/dev, held by a person at minute 10; its weekly 1 GPU-hour budget (``hold``) is spent at minute 60
  (1 GPU x 1 h); the next week gives it room, and the aggregator still leaves the person's hold in place.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario
from tests.integration.test_golden import close

START = 1_799_013_600.0  # Sunday 2027-01-03 22:00:00 UTC: the week rolls over 2 h later
SCENARIO = """
tick: 15s
duration: 130m
prices: {"NVIDIA H100 80GB HBM3": 4.00, "NVIDIA A100-SXM4-80GB": 2.50}
nodes:
  - {name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 8}
  - {name: n-a100, model: "NVIDIA A100-SXM4-80GB", gpus: 4}
namespaces: [{name: team-a}, {name: team-b}]
queues:
  - {kind: kueue, name: gpu, gpus: 8, local_queues: [{namespace: team-a, name: train}, {namespace: team-a, name: dev}]}
  - {kind: volcano, name: research, gpus: 4, namespaces: [team-b]}
pods:
  - {name: train-0, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 110m}
  - {name: train-1, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 110m}
  - {name: train-2, namespace: team-a, node: n-h100, gpus: 2, queue: train, start: 70m, end: 100m}
  - {name: dev-0, namespace: team-a, node: n-h100, gpus: 1, queue: dev, end: 65m}
  - {name: r0, namespace: team-b, node: n-a100, gpus: 4, queue: research, end: 100m}
budgets:
  - {name: train-weekly, target: {kueue_local_queue: team-a/train}, gpu_hours: 4, window: week, action: hold}
  - {name: dev-weekly, target: {kueue_local_queue: team-a/dev}, gpu_hours: 1, window: week, action: hold}
  - {name: research-month, target: {volcano_queue: research}, money: 10.00, window: month, action: hold}
events:
  - {type: queue_hold, queue: team-a/dev, at: 10m}
  - {type: budget_change, budget: research-month, at: 80m, money: 20.00}
"""


async def _kubectl(pipe: Pipeline, work: Path, *args: str) -> str:
    """kubectl against the simulated API (a private cache dir); "" when kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return ""
    proc = await asyncio.create_subprocess_exec(
        kubectl, "--kubeconfig", str(pipe.peers.kubeconfig), "--cache-dir", str(work / "kube-cache"), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "HOME": str(work)})
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _obj(pipe: Pipeline, kind: str, ns: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = pipe.peers.cluster.store.objects[kind][(ns, name)]
    return obj


def _stop(pipe: Pipeline, lq: str) -> str:
    return str(_obj(pipe, "localqueues", "team-a", lq)["spec"]["stopPolicy"])


def _phase(pipe: Pipeline, pod: str) -> str:
    obj = pipe.peers.cluster.store.objects["pods"].get(("team-a", pod))
    return "Gone" if obj is None else str(obj["status"]["phase"])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Drive the scenario tick by tick, noting what the cluster looked like at the moments the goldens name."""

    async def drive() -> dict[str, Any]:
        work = tmp_path_factory.mktemp("budget-actions")
        pipe = Pipeline(parse_scenario(SCENARIO, "budgets.yaml"), work, clock=VirtualClock(START))
        await pipe.start()
        agg = pipe.aggregator
        assert agg is not None
        seen: dict[str, Any] = {}
        try:
            for k in range(0, 125 * 4 + 1):
                t = k * 15.0
                await pipe.step(t)
                store = pipe.peers.cluster.store
                if t == 3585:  # 3.983 GPU-h of 4: not yet
                    seen["train_before"] = _stop(pipe, "train")
                    seen["research_before"] = _obj(pipe, "queues", "", "research")["status"]["state"]
                if t == 3600:
                    seen["train_at_60"] = _stop(pipe, "train")
                    seen["train_annotations"] = dict(_obj(pipe, "localqueues", "team-a", "train")["metadata"]
                                                     .get("annotations") or {})
                    seen["commands_at_60"] = [c["action"] for c in store.objects["commands"].values()]
                    seen["dev_at_60"] = _stop(pipe, "dev")
                if t == 3615:
                    seen["research_at_60"] = _obj(pipe, "queues", "", "research")["status"]["state"]
                if t == 100 * 60:
                    seen["train2_at_100"] = _phase(pipe, "train-2")
                    seen["train0_at_100"] = _phase(pipe, "train-0")
                    seen["research_at_100"] = _obj(pipe, "queues", "", "research")["status"]["state"]
                    async with aiohttp.ClientSession() as http:
                        async with http.get(f"http://{agg.settings.listen}/metrics") as resp:
                            seen["metrics"] = await resp.text()
                        async with http.get(f"http://{agg.settings.listen}/") as resp:
                            seen["status"] = await resp.text()
                        async with http.get(f"http://{agg.settings.listen}/api/v1/report",
                                            params={"view": "window-budgets"}) as resp:
                            seen["api"] = {r["budget"]: r for r in await resp.json()}
                    seen["kubectl"] = await _kubectl(pipe, work, "get", "localqueues", "-n", "team-a", "-o",
                                                     "jsonpath={range .items[*]}{.metadata.name}={.spec.stopPolicy} "
                                                     "{end}")
                if t == 120 * 60 + 15:
                    seen["train_at_120"] = _stop(pipe, "train")
                    seen["train2_at_120"] = _phase(pipe, "train-2")
                    seen["dev_at_120"] = _stop(pipe, "dev")
            seen["events"] = [(e["involvedObject"]["name"], e["reason"], e["message"])
                              for e in pipe.peers.cluster.store.objects["events"].values()
                              if e["involvedObject"].get("kind") in ("LocalQueue", "Queue")]
            seen["actions"] = dict(agg.budget_control.actions)
            seen["report"] = {r["pod"]: r for r in await agg.ledger.run_report("pod", since=None, until=None)}
        finally:
            await pipe.close()
        return seen

    return asyncio.run(drive())


def test_weekly_gpu_hour_budget_holds_the_local_queue(run: dict[str, Any]) -> None:
    """At minute 59:45 train has spent 2 x 2 x 3585/3600 = 3.983 GPU-h: not held; at minute 60, 2 x 2 x 1 = 4 GPU-h:
    the LocalQueue's stopPolicy is Hold (never HoldAndDrain: the budget says hold), annotated with the budget, and an
    Event on it says why."""
    assert run["train_before"] == "None"
    assert run["train_at_60"] == "Hold"
    assert run["train_annotations"] == {"gpu.platform/held-by-budget": "train-weekly"}
    reasons = [(name, reason) for name, reason, _m in run["events"]]
    assert ("train", "BudgetSpent") in reasons
    message = next(m for name, r, m in run["events"] if (name, r) == ("train", "BudgetSpent"))
    assert "4.000000000 GPU-h / 4 GPU-h" in message


def test_held_queue_admits_nothing_new_and_running_pods_are_charged(run: dict[str, Any]) -> None:
    """train-2 (submitted at minute 70) is Pending at minute 100; train-0 keeps running; both first pods are charged
    their whole 110 minutes: 2 GPUs x 110/60 h = 3.667 GPU-h, x 4.00 = 14.67 each."""
    assert run["train2_at_100"] == "Pending"
    if run["kubectl"]:  # kubectl installed: the hold is what `kubectl get localqueues` shows
        assert sorted(run["kubectl"].split()) == ["dev=Hold", "train=Hold"]
    assert run["train0_at_100"] == "Running"
    for pod in ("train-0", "train-1"):
        close(run["report"][pod]["allocated_gpu_hours"], 2 * 110 / 60)
        close(run["report"][pod]["cost"], 2 * 110 / 60 * 4.00)


def test_next_week_releases_the_hold(run: dict[str, Any]) -> None:
    """At minute 120 the week rolls over: train has spent 0 of its 4 GPU-h, the aggregator sets stopPolicy back to
    None, and train-2 starts (it waited 50 minutes)."""
    assert run["train_at_120"] == "None"
    assert run["train2_at_120"] == "Running"
    assert run["actions"][("train-weekly", "hold")] == 1
    assert run["actions"][("train-weekly", "release")] == 1


def test_volcano_queue_closed_then_reopened_when_the_budget_is_raised(run: dict[str, Any]) -> None:
    """research: 4 A100 x 2.50 x 1 h = 10.00 spent at minute 60 -> a CloseQueue Command (Volcano's controller applies
    it within the next tick); raised to 20.00 at minute 80 while 4 x 80/60 x 2.50 = 13.33 is spent -> OpenQueue."""
    assert run["research_before"] == "Open"
    assert run["commands_at_60"] == ["CloseQueue"]
    assert run["research_at_60"] == "Closed"
    assert run["research_at_100"] == "Open"
    assert run["actions"][("research-month", "hold")] == 1
    assert run["actions"][("research-month", "release")] == 1


def test_a_queue_held_by_a_person_is_left_alone(run: dict[str, Any]) -> None:
    """dev was held by hand at minute 10; its budget (1 GPU x 1 h = 1 GPU-h) is spent at minute 60 and has room again
    at minute 120, yet the aggregator neither takes the hold over nor releases it."""
    assert run["dev_at_60"] == "Hold"
    assert run["dev_at_120"] == "Hold"
    assert ("dev-weekly", "hold") not in run["actions"]
    assert ("dev-weekly", "release") not in run["actions"]


def _value(metrics: str, series: str) -> float:
    line = next(x for x in metrics.splitlines() if x.split(" ")[0] == series)
    return float(line.rsplit(" ", 1)[1])


def test_budget_series_and_status_page_at_minute_100(run: dict[str, Any]) -> None:
    """At minute 100 train has spent 2 x 2 x 100/60 = 6.667 GPU-h of 4 (ratio 1.667, none left), burning 6.667 GPU-h
    over the week elapsed (Monday 00:00 UTC to Sunday 22:00 + 100 min = 6 x 24 + 22 + 1.667 = 167.667 h):
    6.667 / 167.667 = 0.03976 GPU-h per hour; it is held (1) and both alert fractions (0.8, 1) are reached. The
    status page lists it as holding now."""
    # the week began Monday 2026-12-28 00:00 UTC: 6 days 22 h before the scenario's start
    m = run["metrics"]
    bw = '{budget="train-weekly",window="week"}'
    close(_value(m, "gpucost_budget_spent_gpu_seconds" + bw) / 3600, 2 * 2 * 100 / 60)  # in seconds, read as GPU-h
    close(_value(m, "gpucost_budget_remaining_gpu_seconds" + bw), 0.0)
    close(_value(m, "gpucost_budget_spent_ratio" + bw), 2 * 2 * 100 / 60 / 4)
    close(_value(m, "gpucost_budget_burn_rate_gpus" + bw), (2 * 2 * 100 / 60) / (6 * 24 + 22 + 100 / 60))
    assert _value(m, "gpucost_budget_held" + bw) == 1
    assert _value(m, 'gpucost_budget_threshold_reached{budget="train-weekly",window="week",threshold="0.8"}') == 1
    assert _value(m, 'gpucost_budget_threshold_reached{budget="train-weekly",window="week",threshold="1"}') == 1
    # per-queue series, refreshed every 300 s of the books (minute 100 is one): train 2 x 2 x 100/60 = 6.667 GPU-h,
    # x 4.00 = 26.67; Volcano research 4 A100 x 100/60 h = 6.667 GPU-h (r0 ends at minute 100), x 2.50 = 16.67
    train = '{scheduler="kueue",queue="team-a/train",cluster_queue="gpu"}'
    close(_value(m, "gpucost_queue_month_allocated_gpu_seconds" + train) / 3600, 2 * 2 * 100 / 60)
    close(_value(m, 'gpucost_queue_month_cost{scheduler="kueue",queue="team-a/train",cluster_queue="gpu",'
                    'currency="USD"}'), 2 * 2 * 100 / 60 * 4.00)
    close(_value(m, 'gpucost_queue_month_allocated_gpu_seconds{scheduler="volcano",queue="research",cluster_queue=""}')
          / 3600, 4 * 100 / 60)
    api = run["api"]["train-weekly"]
    assert (api["target_kind"], api["namespace"], api["acts"]) == ("kueue_local_queue", "team-a", True)
    close(api["spent_gpu_hours"], 2 * 2 * 100 / 60)
    close(api["spent_money"], 2 * 2 * 100 / 60 * 4.00)
    assert api["remaining_gpu_hours"] == 0
    assert "Queues and budgets" in run["status"]
    assert "hold · holding now" in run["status"]
