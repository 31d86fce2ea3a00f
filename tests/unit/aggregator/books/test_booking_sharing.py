"""Booking by sharing mode: a snapshot's ``sharing`` becomes the usage key's; an older agent's snapshot (no
field) parses and books "" (unknown); a mode this build does not know, or an oversized value, books "" too,
rather than refusing the snapshot; a holder whose mode changes keeps its high-water mark."""

from __future__ import annotations

import json
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import UsageKey
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import HolderCounters, UsageSnapshot, parse_snapshot

PRICING = parse_pricing('default_price: 1\nmodels: {"NVIDIA L4": 0.8}\n', "p")
L4 = "NVIDIA L4"


def _wire(seq: int, ts: float, alloc: float, **extra: Any) -> UsageSnapshot:
    """A snapshot as it arrives on the wire (JSON), its one holder carrying ``extra`` fields."""
    holder = {"namespace": "ns", "pod": "p", "container": "c", "device_id": "GPU-1::0", "gpu_uuid": "GPU-1",
              "gpu_model": L4, "fraction": 0.5, "allocated_s": alloc, "used_s": 0.0, "unmeasured_s": 0.0, **extra}
    body = {"node": "n1", "epoch": "e1", "timestamp": ts, "seq": seq, "holders": [holder]}
    return parse_snapshot(json.dumps(body))


def _kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {}
    k.pods[("ns", "p")] = PodInfo("ns", "p", "u", "n1", "Running", 0.5, "wl", "Deployment", "", {}, "", "", "")
    return k


def _booked(*snaps: UsageSnapshot) -> dict[str, Decimal]:
    """GPU-seconds booked per sharing mode over the snapshots, in order."""
    books, k = Books(LedgerState()), _kube()
    out: dict[str, Decimal] = {}
    for s in snaps:
        p = books.prepare([s], k, pricing=PRICING)
        for key, amount in p.write.usage.items():
            out[key.sharing] = out.get(key.sharing, Decimal(0)) + amount.allocated_s
        books.apply(p)
    return out


def test_old_snapshot_without_the_field_books_unknown() -> None:
    """An older agent says nothing: 0 then 1800 s booked under sharing "" (1800 GPU-s)."""
    assert _booked(_wire(1, 7200.0, 0.0), _wire(2, 9000.0, 1800.0)) == {"": 1800.0}


def test_mode_on_the_wire_is_the_usage_key() -> None:
    """1800 s from an agent that says mps: the usage row's key names mps."""
    books, k = Books(LedgerState()), _kube()
    books.apply(books.prepare([_wire(1, 7200.0, 0.0, sharing="mps")], k, pricing=PRICING))
    p = books.prepare([_wire(2, 9000.0, 1800.0, sharing="mps")], k, pricing=PRICING)
    (key,) = p.write.usage
    assert key == UsageKey(7200, "ns", "p", "wl", "n1", "", L4, "", "", "USD", "", "mps")


def test_unknown_or_oversized_mode_books_unknown() -> None:
    """Only the five modes are kept; anything else (a newer agent's word, 10 000 characters, a number) is ""."""
    base, wire = asdict(_wire(1, 0.0, 0.0).holders[0]), TypeAdapter(HolderCounters)
    for bad in ("quantum", "m" * 10_000, 7, None):
        assert wire.validate_python({**base, "sharing": bad}).sharing == ""
    for good in ("none", "time-slicing", "mps", "hami", "dra"):
        assert _wire(1, 0.0, 0.0, sharing=good).holders[0].sharing == good


def test_changed_mode_keeps_the_high_water_mark() -> None:
    """The counter is keyed without its mode: 0, 1800 s as time-slicing, then 3600 s as mps books
    1800 time-slicing + (3600 - 1800) = 1800 mps = 3600 in all, not 1800 + 3600."""
    booked = _booked(_wire(1, 7200.0, 0.0, sharing="time-slicing"), _wire(2, 9000.0, 1800.0, sharing="time-slicing"),
                     _wire(3, 10800.0, 3600.0, sharing="mps"))
    assert booked == {"time-slicing": 1800.0, "mps": 1800.0}
