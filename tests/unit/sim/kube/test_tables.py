"""Server-side printing helpers of the simulated API server."""

from __future__ import annotations

import pytest

from exporter.sim.kube.discovery import RESOURCES, group_list, resource_list, served
from exporter.sim.kube.tables import human_age, table, wants_table


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (599, "9m59s"), (600, "10m"), (179 * 60, "179m"),
    (3 * 3600 + 5 * 60, "3h5m"), (8 * 3600 + 5 * 60, "8h"), (47 * 3600, "47h"), (2 * 86400 + 4 * 3600, "2d4h"),
    (9 * 86400, "9d"),
])
def test_human_age_is_kubernetes_short_form(seconds: int, text: str) -> None:
    assert human_age(seconds) == text


def test_table_is_asked_for_only_with_the_meta_group() -> None:
    kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io"
    assert wants_table(kubectl)
    assert not wants_table("application/json")


def test_pod_row_cells() -> None:
    pod = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
           "status": {"phase": "Succeeded", "containerStatuses": [{"ready": True, "restartCount": 2},
                                                                  {"ready": False, "restartCount": 1}]}}
    now = 1767225600.0 + 90  # 2026-01-01T00:01:30Z
    doc = table("pods", [pod], now=now, resource_version="7")
    assert doc["rows"][0]["cells"] == ["p", "1/2", "Completed", 3, "90s", "", "n1"]
    assert [c["priority"] for c in doc["columnDefinitions"]] == [0, 0, 0, 0, 0, 1, 1]


def test_crd_groups_are_announced_only_when_installed() -> None:
    none = served(frozenset())
    assert [g["name"] for g in group_list(none)["groups"]] == ["coordination.k8s.io", "resource.k8s.io"]
    every = served(frozenset({"kueue", "volcano", "kai"}))
    assert len(every) == len(RESOURCES)
    kueue = resource_list("kueue.x-k8s.io/v1beta2", every)
    assert [(r["name"], r["namespaced"]) for r in kueue["resources"]] == [("clusterqueues", False),
                                                                        ("localqueues", True), ("workloads", True)]
    assert {"patch"} <= set(kueue["resources"][1]["verbs"])  # a budget's hold patches spec.stopPolicy
    kai = resource_list("scheduling.run.ai/v2", every)
    assert [r["name"] for r in kai["resources"]] == ["queues"]
    assert "scheduling.run.ai" not in [g["name"] for g in group_list(served(frozenset({"kueue"})))["groups"]]
