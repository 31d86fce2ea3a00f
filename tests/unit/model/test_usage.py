"""The ``/v1/usage`` wire types: what a body decodes to, what a snapshot encodes to, and their shape in memory (the
aggregator keeps every node's latest snapshot, so a holder must not carry a per-instance ``__dict__``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

import pytest
from pydantic import ValidationError

from exporter.model.usage import (
    MAX_HOLDERS,
    GpuCapacity,
    HolderCounters,
    UnallocatedCounter,
    UsageSnapshot,
    parse_snapshot,
    snapshot_json,
)

H100 = "NVIDIA H100 80GB HBM3"
HOLDER = {"namespace": "ml", "pod": "train-0", "container": "main", "device_id": "GPU-1", "gpu_uuid": "GPU-1",
          "gpu_model": H100, "fraction": 1.0, "allocated_s": 30.0, "used_s": 12.5, "unmeasured_s": 0.0,
          "energy_j": 9000.0, "utilization": 0.4}
BODY = {"node": "n1", "epoch": "e1", "timestamp": 1800000030.0, "started_at": 1800000000.0, "seq": 3,
        "holders": [HOLDER], "unallocated": [{"gpu_model": H100, "seconds": 210.0}],
        "capacity": [{"gpu_uuid": f"GPU-{i}", "gpu_model": H100} for i in range(8)]}


def test_a_body_decodes_to_its_values_and_encodes_back_to_them() -> None:
    """Every field given comes back as given; the defaults fill the rest; unknown fields are ignored."""
    snap = parse_snapshot(json.dumps({**BODY, "from_a_newer_agent": {"x": 1}}))
    (h,) = snap.holders
    assert (snap.node, snap.seq, snap.started_at, h.key()) == ("n1", 3, 1800000000.0, "ml/train-0/main/GPU-1")
    assert (h.allocated_s, h.used_s, h.energy_j, h.utilization, h.claim, h.sharing) == (30.0, 12.5, 9000.0, 0.4, "", "")
    assert snap.unallocated == [UnallocatedCounter(gpu_model=H100, seconds=210.0)]
    wire = json.loads(snapshot_json(snap))
    assert "from_a_newer_agent" not in wire and parse_snapshot(snapshot_json(snap)) == snap
    # Every field on the wire, defaults included: an aggregator of another version reads what it knows.
    assert wire["holders"] == [{**HOLDER, "mig_profile": None, "active": True, "fb_peak_bytes": None,
                                "fb_peak_hour": None, "claim": "", "sharing": "", "split_s": 0.0}]
    assert {k: v for k, v in wire.items() if k not in ("holders", "capacity")} == {
        "node": "n1", "epoch": "e1", "timestamp": 1800000030.0, "started_at": 1800000000.0, "seq": 3, "dcgm_up": True,
        "podresources_up": True, "unallocated": [{"gpu_model": H100, "seconds": 210.0, "energy_j": 0.0}],
        "unobserved": [], "unmeasured_energy_s": 0.0}
    assert wire["capacity"][0] == {"gpu_uuid": "GPU-0", "gpu_model": H100, "index": "", "utilization": None,
                                   "held_fraction": 0.0}


@pytest.mark.parametrize(("field", "value"), [("allocated_s", -1.0), ("used_s", float("nan")),
                                              ("energy_j", float("inf")), ("fraction", 1.5), ("pod", "p" * 254)])
def test_a_holder_value_out_of_bounds_refuses_the_snapshot(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        parse_snapshot(json.dumps({**BODY, "holders": [{**HOLDER, field: value}]}))


def test_no_more_holders_than_the_bound() -> None:
    """A hostile agent cannot make the aggregator build an unbounded list: 20,000 holders decode, 20,001 refuse."""
    holders = [{**HOLDER, "pod": f"p-{i}"} for i in range(MAX_HOLDERS)]
    assert len(parse_snapshot(json.dumps({**BODY, "holders": holders})).holders) == MAX_HOLDERS
    with pytest.raises(ValidationError):
        parse_snapshot(json.dumps({**BODY, "holders": [*holders, HOLDER]}))


def test_wire_types_are_built_by_keyword_only() -> None:
    """pydantic's dataclasses would take positional arguments in an order of their own (plain defaults last), a
    value landing in another field: refused, for every wire type."""
    for cls in (HolderCounters, UnallocatedCounter, GpuCapacity, UsageSnapshot):
        with pytest.raises(TypeError):
            cast(Any, cls)("n1", "e1", 1.0)
    assert UnallocatedCounter(gpu_model=H100, seconds=1.0).seconds == 1.0


def test_wire_types_are_frozen_and_without_a_per_instance_dict() -> None:
    """Slotted: 2.9 KB a snapshot of 8 holders where a model with its ``__dict__`` and set of given fields took
    13.4 KB (docs/fleet.md, Memory); frozen: what the books and gauges read cannot change under them."""
    snap = parse_snapshot(json.dumps(BODY))
    for obj, name in ((snap, "node"), (snap.holders[0], "allocated_s"), (snap.unallocated[0], "seconds"),
                      (snap.capacity[0], "gpu_uuid")):
        assert not hasattr(obj, "__dict__")
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, getattr(obj, name))
