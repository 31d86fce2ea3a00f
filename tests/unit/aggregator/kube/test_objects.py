"""The scheduler's pending messages read into the reasons the status page and metrics show."""

from __future__ import annotations

from exporter.aggregator.kube.objects import classify_pending


def test_classify_pending_messages() -> None:
    """Scheduler messages map to reasons; a message with several reasons counts under each."""
    msg = ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
           "affinity/selector. preemption: 0/3 nodes are available: 3 No preemption victims found.")
    assert classify_pending(msg) == ["insufficient_gpu", "node_affinity"]
    assert classify_pending("0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}.") \
        == ["taint"]
    assert classify_pending("pods \"x\" is forbidden: exceeded quota: gpu-quota") == ["quota"]
    assert classify_pending("0/1 nodes are available: 1 Insufficient memory.") == ["other"]
