"""The snapshot gate's edges: what a refusal logs (node, reason, the error's first 300 characters), the cap on
logged lines, an agent that said nothing in the middle of a tick, and forgetting a pin nobody made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from structlog.testing import capture_logs

from exporter.aggregator.books import gate as gate_module
from exporter.aggregator.books.gate import SnapshotGate
from exporter.clients.agents import PullResult
from exporter.model.usage import UsageSnapshot

A, B, C = "http://10.0.0.1:9400", "http://10.0.0.2:9400", "http://10.0.0.3:9400"


def _snapshot(node: str) -> UsageSnapshot:
    return UsageSnapshot(node=node, epoch="e1", timestamp=1_800_000_000.0)


def _rejections(logs: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """The rejection lines, without the level every line carries."""
    return [{k: v for k, v in e.items() if k != "log_level"} for e in logs if e["event"] == "agent_snapshot_rejected"]


def test_an_invalid_answer_logs_its_url_no_node_and_the_error() -> None:
    """An answer the schema refused names no node (there is no snapshot to read one from) and logs the error."""
    gate = SnapshotGate()
    with capture_logs() as logs:
        gate.admit([PullResult(A, None, error="holders.0.allocated_s: negative", invalid=True)], expected=None)
    assert _rejections(logs) == [{"event": "agent_snapshot_rejected", "url": A, "node": "", "reason": "invalid",
                                  "detail": "holders.0.allocated_s: negative"}]


def test_an_invalid_answer_without_an_error_logs_an_empty_detail() -> None:
    gate = SnapshotGate()
    with capture_logs() as logs:
        gate.admit([PullResult(A, None, invalid=True)], expected=None)
    assert [e["detail"] for e in _rejections(logs)] == [""]


def test_a_long_error_is_logged_cut_to_300_characters() -> None:
    """A hostile agent's answer can be megabytes; the log line keeps its first 300 characters, no more, no fewer."""
    gate = SnapshotGate()
    with capture_logs() as logs:
        gate.refuse(url=A, node="gpu-1", reason="invalid", detail="x" * 299 + "yz")
    assert [e["detail"] for e in _rejections(logs)] == ["x" * 299 + "y"]


def test_a_refused_snapshot_logs_the_node_it_claimed() -> None:
    """B claims gpu-1, pinned to A: the line names gpu-1, the reason, and an empty detail."""
    gate = SnapshotGate(pins={"gpu-1": A})
    with capture_logs() as logs:
        gate.admit([PullResult(B, _snapshot("gpu-1"))], expected=None)
    assert _rejections(logs) == [{"event": "agent_snapshot_rejected", "url": B, "node": "gpu-1",
                                  "reason": "node_mismatch", "detail": ""}]


def test_logged_lines_stop_at_the_cap_and_counting_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cap of 2 (url, reason) pairs, the third new pair is counted and not logged: 2 lines, 3 counts."""
    monkeypatch.setattr(gate_module, "MAX_LOGGED", 2)
    gate = SnapshotGate()
    with capture_logs() as logs:
        for url in (A, B, C):
            gate.refuse(url=url, node="gpu-1", reason="duplicate")
    assert [e["url"] for e in _rejections(logs)] == [A, B]
    assert gate.rejected == {"duplicate": 3}


def test_an_agent_that_said_nothing_does_not_end_the_tick() -> None:
    """A down agent (no snapshot, not invalid) and an invalid one first in the list: the agents after them are
    still admitted, with the very snapshot they sent."""
    sent_b, sent_c = _snapshot("gpu-2"), _snapshot("gpu-3")
    gate = SnapshotGate()
    out = gate.admit([PullResult(A, None, error="connection refused"), PullResult(B, sent_b),
                      PullResult("http://bad", None, error="schema", invalid=True), PullResult(C, sent_c)],
                     expected=None)
    assert {node: (s.url, s.snapshot) for node, s in out.snapshots.items()} == {
        "gpu-2": (B, sent_b), "gpu-3": (C, sent_c)}
    assert out.new_pins == {"gpu-2": B, "gpu-3": C}
    assert gate.rejected == {"invalid": 1}


def test_a_refused_snapshot_does_not_end_the_tick() -> None:
    """B's refused claim comes before C's good snapshot: C is admitted all the same."""
    gate = SnapshotGate(pins={"gpu-1": A})
    out = gate.admit([PullResult(B, _snapshot("gpu-1")), PullResult(C, _snapshot("gpu-3"))], expected=None)
    assert set(out.snapshots) == {"gpu-3"}
    assert out.refused_urls == {B}


def test_unpinning_a_node_nobody_pinned_is_harmless() -> None:
    """Closing the books of a node that never proved a URL (discovered agents pin nothing) must not fail."""
    gate = SnapshotGate(pins={"gpu-1": A})
    gate.unpin("gpu-9")
    assert gate.pins == {"gpu-1": A}
