"""Scenario queues, pods' queues and budgets: what they resolve to, and one line naming the field when wrong."""

from __future__ import annotations

import pytest

from exporter.sim.scenario import ScenarioError, parse_scenario
from exporter.sim.spec import PodQueue

HEAD = """
prices: {"NVIDIA H100 80GB HBM3": 4}
nodes: [{name: n, model: "NVIDIA H100 80GB HBM3", gpus: 4}]
namespaces: [{name: team-a}, {name: team-b}]
queues:
  - {kind: kueue, name: gpu, gpus: 4, local_queues: [{namespace: team-a, name: train}]}
  - {kind: volcano, name: research, gpus: 4, namespaces: [team-b]}
  - {kind: kai, name: team-c, gpus: 2}
"""


def test_pod_queues_resolve_by_scheduler() -> None:
    s = parse_scenario(HEAD + """
pods:
  - {name: a, namespace: team-a, node: n, queue: train}
  - {name: b, namespace: team-b, node: n, queue: research}
  - {name: c, namespace: team-b, node: n, queue: team-c, annotations: {example.com/k: v}}
""", "s.yaml")
    assert [p.queue for p in s.pods] == [PodQueue("kueue", "train", "gpu"), PodQueue("volcano", "research"),
                                         PodQueue("kai", "team-c")]
    assert s.pods[2].annotations == {"example.com/k": "v"}


@pytest.mark.parametrize(("tail", "field"), [
    ("pods: [{name: a, namespace: team-b, node: n, queue: train}]", "pods[0].queue"),  # train is team-a's
    ("budgets: [{name: x, target: {volcano_queue: research}, window: month}]", "budgets[0]"),
    ("events: [{type: budget_change, budget: nope, at: 1m, money: 1}]", "events[0].budget"),
    ("events: [{type: queue_hold, queue: team-a/dev, at: 1m}]", "events[0].queue"),
])
def test_bad_queue_fields_name_the_field(tail: str, field: str) -> None:
    with pytest.raises(ScenarioError, match=r"^s\.yaml: ") as err:
        parse_scenario(HEAD + tail + "\n", "s.yaml")
    assert field in str(err.value)
    assert "\n" not in str(err.value)
