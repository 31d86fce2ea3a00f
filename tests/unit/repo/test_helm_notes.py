"""NOTES.txt tells the installer where the agents run, in words: the GPU node labels they are scheduled on, the
nodeSelector and affinity when set; never a YAML dump such as ``nodes labelled {}``."""

from __future__ import annotations

from tests.unit.repo.helm_render import render


def test_notes_say_where_the_agents_run() -> None:
    notes = render({}).notes
    assert "labelled {}" not in notes
    assert ("Agents run on nodes with any of nvidia.com/gpu.present=true, feature.node.kubernetes.io/amd-gpu=true, "
            "feature.node.kubernetes.io/pci-1da3.present=true,") in notes, notes


def test_notes_name_a_node_selector_and_every_node() -> None:
    notes = render({"agent": {"nodeSelector": {"gpu": "yes"}, "gpuNodeLabels": []}}).notes
    assert "Agents run on nodes labelled gpu=yes," in notes, notes
    everywhere = render({"agent": {"gpuNodeLabels": []}}).notes
    assert "Agents run on every node (agent.gpuNodeLabels and agent.nodeSelector are empty)," in everywhere
