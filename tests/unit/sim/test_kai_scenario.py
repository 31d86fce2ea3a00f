"""Scenario fields for KAI fractions and DRA behind nvidia.com/gpu: placement as KAI's binder does it, and
errors that name the file and the field."""

from __future__ import annotations

import pytest

from exporter.sim.scenario import ScenarioError, parse_scenario

HEAD = ('prices: {"NVIDIA H100 80GB HBM3": 4.0}\nnodes: [{name: k, model: "NVIDIA H100 80GB HBM3", gpus: 2, '
        'scheduler: kai}, {name: plain, model: "NVIDIA H100 80GB HBM3", gpus: 1}]\npods: ')


def test_fractions_fill_the_lowest_gpu_with_room_and_a_gap_starts_a_new_group() -> None:
    """0.5 + 0.5 fill GPU 0; the third 0.5 goes to GPU 1. c ends at 10m and d starts at 20m on GPU 1: two
    reservation pods for GPU 1, one per period, each with its own group."""
    s = parse_scenario(HEAD + "[{name: a, namespace: n, node: k, kai: {fraction: 0.5}}, "
                       "{name: b, namespace: n, node: k, kai: {fraction: 0.5}}, "
                       "{name: c, namespace: n, node: k, kai: {fraction: 0.5}, end: 10m}, "
                       "{name: d, namespace: n, node: k, kai: {fraction: 0.5}, start: 20m}]\n", "s.yaml")
    placed = {p.name: p.kai.placed for p in s.pods if p.kai is not None and not p.kai.reservation}
    assert placed == {"a": (0,), "b": (0,), "c": (1,), "d": (1,)}
    res = sorted((p.kai.placed, p.start, p.end) for p in s.pods if p.kai is not None and p.kai.reservation)
    assert res == [((0,), 0.0, None), ((1,), 0.0, 600.0), ((1,), 1200.0, None)]
    groups = {p.name: p.labels["runai-gpu-group"] for p in s.pods if p.namespace == "n"}
    assert groups["a"] == groups["b"] and len({groups["a"], groups["c"], groups["d"]}) == 3


@pytest.mark.parametrize(("pods", "error"), [
    ("[{name: a, namespace: n, node: plain, kai: {fraction: 0.5}}]",
     "pods[0].kai: only for pods on a node with scheduler: kai"),
    ("[{name: a, namespace: n, node: k, gpus: 1, kai: {fraction: 0.5}}]",
     "pods[0].gpus: a KAI fraction requests no GPU resource"),
    ("[{name: a, namespace: n, node: k, kai: {fraction: 1}}]", "pods[0].kai.fraction: 1.0 is not between 0 and 1"),
    ("[{name: a, namespace: n, node: k, kai: {fraction: 0.5, memory_mib: 100}}]",
     "pods[0].kai: give exactly one of fraction and memory_mib"),
    ("[{name: a, namespace: n, node: k, kai: {fraction: 0.5, gpu: 1, devices: 2}}]",
     "pods[0].kai.gpu: GPUs 1..2 are not all on node k"),
    ("[{name: a, namespace: n, node: k, kai: {fraction: 0.75, gpu: 0}}, "
     "{name: b, namespace: n, node: k, kai: {fraction: 0.5, gpu: 0}}]",
     "pods[1].kai: node k has no room for 0.5 of 1 GPU"),
    ("[{name: a, namespace: n, node: k, kai: {memory_mib: 90000}}]",
     "pods[0].kai.memory_mib: 90000 MiB is not less than"),
])
def test_kai_scenario_errors_name_the_field(pods: str, error: str) -> None:
    with pytest.raises(ScenarioError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario(HEAD + pods + "\n", "s.yaml")


def test_dra_extended_node_rejects_device_plugin_sharing() -> None:
    with pytest.raises(ScenarioError, match=r"nodes\[0\]\.dra_extended: a node served by the NVIDIA DRA driver"):
        parse_scenario('prices: {"NVIDIA L4": 1.0}\nnodes: [{name: x, model: "NVIDIA L4", gpus: 1, time_slicing: 2, '
                       'dra_extended: true}]\n', "s.yaml")
