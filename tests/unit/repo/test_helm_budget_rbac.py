"""The aggregator's grants for budgets that act: none by default (it only reads queues, Workloads and PodGroups),
``patch`` on Kueue queues only when a budget holds a Kueue queue, ``create`` on Volcano Commands (and ``patch`` on
Volcano Queues for the annotation) only when one holds a Volcano queue, ``create`` on Events with either; and the
budgets file beside the pricing file."""

from __future__ import annotations

from typing import Any

from tests.unit.repo.helm_render import FULL, render

KUEUE = {"name": "train-weekly", "target": {"kueue_local_queue": "team-a/train"}, "gpu_hours": 4, "window": "week",
         "action": "hold"}
VOLCANO = {"name": "research-month", "target": {"volcano_queue": "research"}, "money": 10, "window": "month",
           "action": "hold"}
ALERT_ONLY = {"name": "team-a-7d", "target": {"namespace": "team-a"}, "money": 500, "window": "7d"}


def writes(values: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of the aggregator's ClusterRole other than get/list/watch and the reviews."""
    role = render(values).named("ClusterRole", f"{FULL}-aggregator")
    return {(g, res, v) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]
            for v in rule["verbs"] if v not in ("get", "list", "watch") and not res.endswith("reviews")}


def test_no_write_grant_by_default_or_for_budgets_that_only_alert() -> None:
    assert writes({}) == set()
    assert writes({"windowBudgets": [ALERT_ONLY]}) == set()
    assert writes({"windowBudgets": [{**KUEUE, "action": "none"}]}) == set()


def test_reads_the_objects_that_name_a_pods_queue() -> None:
    role = render({}).named("ClusterRole", f"{FULL}-aggregator")
    reads = {(g, res) for rule in role["rules"] if rule["verbs"] == ["get", "list", "watch"]
             for g in rule["apiGroups"] for res in rule["resources"]}
    assert {("kueue.x-k8s.io", "workloads"), ("scheduling.volcano.sh", "podgroups"),
            ("scheduling.run.ai", "podgroups")} <= reads


def test_each_action_gets_exactly_its_grant() -> None:
    assert writes({"windowBudgets": [KUEUE]}) == {("kueue.x-k8s.io", "clusterqueues", "patch"),
                                                   ("kueue.x-k8s.io", "localqueues", "patch"), ("", "events", "create")}
    assert writes({"windowBudgets": [VOLCANO, ALERT_ONLY]}) == {
        ("bus.volcano.sh", "commands", "create"), ("scheduling.volcano.sh", "queues", "patch"),
        ("", "events", "create")}


def test_budgets_file_is_written_and_pointed_at() -> None:
    out = render({"windowBudgets": [KUEUE], "windowBudgetsDryRun": True})
    cm = out.named("ConfigMap", f"{FULL}-pricing")
    assert "train-weekly" in cm["data"]["budgets.yaml"]
    env = {e["name"]: e.get("value") for c in out.pod("Deployment")["containers"] for e in c.get("env", [])}
    assert env["GPUCOST_WINDOW_BUDGETS_FILE"] == "/etc/gpu-cost-exporter/budgets.yaml"
    assert env["GPUCOST_BUDGET_DRY_RUN"] == "true"
