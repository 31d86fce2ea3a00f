"""The agent's state file: an older version is migrated, never reset, and round-trips."""

from __future__ import annotations

from exporter.agent.state import dump_meter, load_meter

H100 = "NVIDIA H100 80GB HBM3"


def test_version_1_state_is_migrated_not_reset() -> None:
    """A version-1 file keeps its epoch and counters; started_at becomes its last tick; unobserved 0."""
    v1 = {"version": 1, "node": "n", "epoch": "e1", "seq": 7, "last_tick": 105.0, "capped_seconds_total": 3.0,
          "holders": [["ns", "p", "c", "GPU-a", "GPU-a", H100, None, 1.0, 90.0, 45.0, 0.0, 12.0, True, 105.0]],
          "unallocated": {H100: 90.0}, "energy_last": {}, "mig_known": {}, "inventory": {"GPU-a": H100}}
    m = load_meter(v1, "n")
    assert (m.epoch, m.seq, m.last_tick, m.started_at) == ("e1", 7, 105.0, 105.0)
    assert m.holders["ns/p/c/GPU-a"].usage.as_tuple() == (90.0, 45.0, 0.0, 12.0)
    assert dict(m.unobserved) == {} and dict(m.unallocated) == {H100: 90.0}
    again = load_meter(dump_meter(m), "n")
    assert dump_meter(again) == dump_meter(m) and dump_meter(m)["version"] == 2
