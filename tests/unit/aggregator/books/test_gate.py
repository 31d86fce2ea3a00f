"""The snapshot gate on its own: which pulled snapshots are admitted, which pins they create, and why the
others are refused. Static agents (``expected=None``) pin a node to the URL that first proved it."""

from __future__ import annotations

from structlog.testing import capture_logs

from exporter.aggregator.books.gate import SnapshotGate
from exporter.clients.agents import PullResult
from exporter.model.usage import UsageSnapshot

A, B = "http://10.0.0.1:9400", "http://10.0.0.2:9400"


def _pulled(url: str, node: str) -> PullResult:
    return PullResult(url, UsageSnapshot(node=node, epoch=f"e-{url}", timestamp=1_800_000_000.0))


def test_a_url_that_proved_one_node_cannot_speak_for_another_node_later() -> None:
    """A proved gpu-1 (pinned in an earlier tick); now it claims gpu-2, which nobody pinned yet: refused as
    url_mismatch, and gpu-2 is not pinned to A (A would then speak for two nodes)."""
    gate = SnapshotGate(pins={"gpu-1": A})
    out = gate.admit([_pulled(A, "gpu-2")], expected=None)
    assert out.snapshots == {}
    assert out.new_pins == {}
    assert out.refused_urls == {A}
    assert gate.rejected == {"url_mismatch": 1}


def test_a_url_that_proved_a_node_this_tick_cannot_claim_a_second_one() -> None:
    """The pin A would create this tick counts already: A's second snapshot (another node) is refused."""
    gate = SnapshotGate()
    out = gate.admit([_pulled(A, "gpu-1"), _pulled(A, "gpu-2")], expected=None)
    assert set(out.snapshots) == {"gpu-1"}
    assert out.new_pins == {"gpu-1": A}
    assert gate.rejected == {"url_mismatch": 1}


def test_a_pinned_node_is_refused_from_any_other_url_whichever_answers_first() -> None:
    """Pinned gpu-1 -> A: B claiming gpu-1 is refused as node_mismatch (not merely as a duplicate), and A is
    still admitted when B's answer comes first in the tick."""
    for order in ([A, B], [B, A]):
        gate = SnapshotGate(pins={"gpu-1": A})
        out = gate.admit([_pulled(url, "gpu-1") for url in order], expected=None)
        assert {node: s.url for node, s in out.snapshots.items()} == {"gpu-1": A}
        assert out.refused_urls == {B}
        assert gate.rejected == {"node_mismatch": 1}


def test_first_url_to_prove_a_node_is_pinned_and_a_second_one_refused() -> None:
    gate = SnapshotGate()
    out = gate.admit([_pulled(A, "gpu-1"), _pulled(B, "gpu-1"), _pulled(B, "gpu-2")], expected=None)
    assert {node: s.url for node, s in out.snapshots.items()} == {"gpu-1": A, "gpu-2": B}
    assert out.new_pins == {"gpu-1": A, "gpu-2": B}
    assert gate.rejected == {"node_mismatch": 1}


def test_discovered_agents_speak_only_for_their_pods_node() -> None:
    gate = SnapshotGate()
    out = gate.admit([_pulled(A, "gpu-1"), _pulled(B, "gpu-1")], expected={A: "gpu-1", B: "gpu-2"})
    assert {node: s.url for node, s in out.snapshots.items()} == {"gpu-1": A}
    assert out.new_pins == {}  # discovery binds by spec.nodeName, nothing is pinned
    assert gate.rejected == {"node_mismatch": 1}


def test_two_urls_of_one_discovered_node_book_it_once() -> None:
    gate = SnapshotGate()
    out = gate.admit([_pulled(A, "gpu-1"), _pulled(B, "gpu-1")], expected={A: "gpu-1", B: "gpu-1"})
    assert {node: s.url for node, s in out.snapshots.items()} == {"gpu-1": A}
    assert gate.rejected == {"duplicate": 1}


def test_a_node_the_api_does_not_have_waits_and_an_invalid_answer_is_counted() -> None:
    gate = SnapshotGate()
    out = gate.admit([_pulled(A, "gone"), PullResult(B, None, error="bad", invalid=True),
                      PullResult("http://down", None, error="refused")], expected=None, known_nodes={"gpu-1"})
    assert out.snapshots == {} and out.new_pins == {}
    assert out.refused_urls == {A, B}  # an agent that is down is not refused: it said nothing
    assert gate.rejected == {"unknown_node": 1, "invalid": 1}


def test_unpinning_a_closed_node_lets_another_url_prove_it() -> None:
    gate = SnapshotGate(pins={"gpu-1": A})
    assert gate.pins_by_url() == {A: "gpu-1"}
    gate.unpin("gpu-1")
    out = gate.admit([_pulled(B, "gpu-1")], expected=None)
    assert out.new_pins == {"gpu-1": B}
    assert gate.rejected == {}


def test_a_thousand_refusals_log_one_line_per_url_and_reason() -> None:
    """500 ticks of B claiming A's pinned node (node_mismatch) and of an agent answering garbage (invalid),
    plus the books' own refusals of A (counter_decreased) 500 times: 1,500 refusals, all counted, 3 log lines
    (one per URL and reason), each naming its URL and reason."""
    gate = SnapshotGate(pins={"gpu-1": A})
    with capture_logs() as logs:
        for _tick in range(500):
            gate.admit([_pulled(A, "gpu-1"), _pulled(B, "gpu-1"), PullResult("http://bad", None, error="schema",
                                                                               invalid=True)], expected=None)
            gate.refuse(url=A, node="gpu-1", reason="counter_decreased")
    assert gate.rejected == {"node_mismatch": 500, "invalid": 500, "counter_decreased": 500}
    lines = [(e["url"], e["reason"]) for e in logs if e["event"] == "agent_snapshot_rejected"]
    assert sorted(lines) == sorted([("http://bad", "invalid"), (A, "counter_decreased"), (B, "node_mismatch")])
