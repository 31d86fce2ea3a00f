"""Pod lifetimes from watch events: start, finish and GPU requests, and when a deleted pod ended."""

from __future__ import annotations

from typing import Any

from exporter.agent.lifecycle import PodLifetimes, finished_at


def test_watch_events_give_start_finish_and_requests() -> None:
    """startTime and the last container's finishedAt (only once all terminated); GPU requests summed."""
    pod: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "p"},
           "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}},
                                   {"name": "b", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}]},
           "status": {"phase": "Running", "startTime": "2027-01-15T08:00:00Z", "containerStatuses": [
               {"state": {"terminated": {"finishedAt": "2027-01-15T08:00:30Z"}}},
               {"state": {"running": {}}}]}}
    lives = PodLifetimes()
    lives.on_event("ADDED", pod, now=0.0)
    life = lives.pods[("ns", "p")]
    assert life.finished is None and life.requests == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 1}
    assert life.container == "a"
    pod["status"]["containerStatuses"][1] = {"state": {"terminated": {"finishedAt": "2027-01-15T08:00:42Z"}}}
    pod["status"]["phase"] = "Succeeded"
    assert life.start is not None and finished_at(pod["status"]) == life.start + 42
    lives.on_event("MODIFIED", pod, now=0.0)
    assert ("ns", "p") in lives.finished and lives.pods[("ns", "p")].end == life.start + 42


def test_deleted_while_running_ends_when_the_deletion_was_seen() -> None:
    """No finishedAt: the pod's end is when DELETED arrived (a deletionTimestamp not after the start,
    as some servers send, is ignored)."""
    pod = {"metadata": {"namespace": "ns", "name": "p", "deletionTimestamp": "2027-01-15T08:00:00Z"},
           "spec": {"containers": []}, "status": {"startTime": "2027-01-15T08:00:00Z"}}
    lives = PodLifetimes()
    lives.on_event("DELETED", pod, now=1_800_000_123.0)
    assert lives.pods[("ns", "p")].end == 1_800_000_123.0
    lives.prune(1_800_000_200.0)
    assert lives.pods == {}
