"""Team tags: the namespace's team label as booking saw it in each hour, kept in the ledger (``namespace_team``)
and exported as ``gpu-cost-exporter/team`` in AllocatedTags and as ``x_Team``; a namespace whose team was not
seen has neither (unknown, never guessed)."""

from __future__ import annotations

import json
from pathlib import Path

from exporter.aggregator.books.teams import book_teams
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.rows import TickWrite
from exporter.model.books import UsageAmounts, UsageKey
from exporter.model.exact import exact
from tests.unit.aggregator.focus.focus_helpers import CapacityRow, UsageRow, assert_focus13_rules, write_ledger
from tests.unit.aggregator.focus.test_focus_golden import HOUR, export_rows

LABEL = "gpu.platform/team"


def test_book_teams_records_the_label_of_each_booked_namespace() -> None:
    kube = KubeState()
    kube.namespaces = {"ml-team": {LABEL: "research"}, "web": {"other": "x"}}
    w = TickWrite()
    amounts = UsageAmounts(allocated_s=exact(1.0))
    for hour, ns in ((HOUR, "ml-team"), (HOUR + 3600, "ml-team"), (HOUR, "web"), (HOUR, "gone")):
        w.usage[UsageKey(hour, ns, "p", "w", "n", "", "m", "", "", "USD")] = amounts
    book_teams(w, kube=kube, team_label=LABEL)
    assert w.namespace_teams == {(HOUR, "ml-team"): "research", (HOUR + 3600, "ml-team"): "research"}


def test_team_in_allocated_tags_and_x_team(tmp_path: Path) -> None:
    """Two pods on one node-hour, 8 H100 at 4.00: ml-team/trainer 2 GPU-h = 8.00 (team research), web/api
    1 GPU-h = 4.00 (no team label seen), unallocated 5 GPU-h = 20.00. 8 + 4 + 20 = 32."""
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer",
                                 allocated_s=7200.0, used_s=7200.0, idle_s=0.0, cost=8.0, idle_cost=0.0),
                        UsageRow(hour=HOUR, node="gpu-node-07", namespace="web", pod="api",
                                 allocated_s=3600.0, used_s=3600.0, idle_s=0.0, cost=4.0, idle_cost=0.0)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=18000.0, cost=20.0)],
                 teams={(HOUR, "ml-team"): "research"})
    rows = {r["x_PodName"] or r["x_CapacityState"]: r for r in export_rows(path, tmp_path)}
    trainer, api, free = rows["trainer"], rows["api"], rows["Unallocated"]
    assert trainer["x_Team"] == "research"
    assert json.loads(trainer["AllocatedTags"])["gpu-cost-exporter/team"] == "research"
    assert api["x_Team"] == "" and "gpu-cost-exporter/team" not in json.loads(api["AllocatedTags"])
    assert free["x_Team"] == "" and free["AllocatedTags"] == ""
    assert [rows[k]["EffectiveCost"] for k in ("trainer", "api", "Unallocated")] == ["8.0", "4.0", "20.0"]
    assert_focus13_rules(list(rows.values()))


def test_queue_in_x_queue_and_allocated_tags(tmp_path: Path) -> None:
    """A pod Kueue admitted through team-a/train (2 GPU-h at 4.00 = 8.00) carries x_Queue team-a/train and the
    scheduler and queue tags; a pod no queue admitted (1 GPU-h, 4.00) and the unallocated capacity have none."""
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="team-a", pod="trainer",
                                 allocated_s=7200.0, used_s=7200.0, idle_s=0.0, cost=8.0, idle_cost=0.0,
                                 scheduler="kueue", queue="team-a/train"),
                        UsageRow(hour=HOUR, node="gpu-node-07", namespace="web", pod="api",
                                 allocated_s=3600.0, used_s=3600.0, idle_s=0.0, cost=4.0, idle_cost=0.0)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=18000.0, cost=20.0)])
    rows = {r["x_PodName"] or r["x_CapacityState"]: r for r in export_rows(path, tmp_path)}
    trainer, api, free = rows["trainer"], rows["api"], rows["Unallocated"]
    assert trainer["x_Queue"] == "team-a/train"
    tags = json.loads(trainer["AllocatedTags"])
    assert (tags["gpu-cost-exporter/scheduler"], tags["gpu-cost-exporter/queue"]) == ("kueue", "team-a/train")
    assert api["x_Queue"] == "" and "gpu-cost-exporter/queue" not in json.loads(api["AllocatedTags"])
    assert free["x_Queue"] == ""
    assert [rows[k]["EffectiveCost"] for k in ("trainer", "api", "Unallocated")] == ["8.0", "4.0", "20.0"]
    assert_focus13_rules(list(rows.values()))
