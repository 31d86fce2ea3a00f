"""The meter's energy: every joule DCGM's counters advanced lands in one bucket (a holder, unallocated,
unobserved), and GPU-seconds without a measurement are counted, with the arithmetic by hand. Readings are
parsed from DCGM Exporter text, both the classic mJ name and DCGM 4.9's joules name."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest
from pydantic import TypeAdapter, ValidationError

from exporter.agent.energy import read_deltas
from exporter.agent.exporters.dcgm import DcgmDevice, build_devices
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.agent.publish import snapshot_of
from exporter.agent.state import dump_meter, load_meter
from exporter.clients.exposition import parse_exposition
from exporter.model.holding import PodLifetime
from exporter.model.pod_resources import ContainerDevices
from exporter.model.usage import UsageSnapshot

H100 = "NVIDIA H100 80GB HBM3"
P = ContainerDevices("ns", "p", "c", "nvidia.com/gpu", ("GPU-a",))
MJ = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # classic name, millijoules
J = "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"  # DCGM 4.9 name, joules


def dcgm(energy: dict[str, float | None], *, name: str = MJ, scale: float = 1000.0) -> dict[
        tuple[str, str], DcgmDevice]:
    """GPU-a and GPU-b as DCGM Exporter writes them; ``energy`` in joules (None: no energy field)."""
    lines = []
    for i, uuid in enumerate(("GPU-a", "GPU-b")):
        labels = f'gpu="{i}",UUID="{uuid}",modelName="{H100}"'
        lines.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.5")
        if (joules := energy.get(uuid)) is not None:
            lines.append(f"{name}{{{labels}}} {joules * scale:.0f}")
    return build_devices(parse_exposition("\n".join(lines) + "\n").samples)


def tick(m: Meter, now: float, held: list[ContainerDevices] | None, readings: dict[tuple[str, str], DcgmDevice] | None,
         *, lives: dict[tuple[str, str], PodLifetime] | None = None, cap: float = 60.0) -> None:
    attribution = None if held is None else attribute(held, readings, allocatable=None, mig_known={}, inventory={})
    m.tick(now, attribution, dcgm=readings, cap=cap, lifetimes=lives, skew=15.0)


def holder_j(m: Meter) -> float:
    return sum(h.usage.energy_j for h in m.holders.values())


def test_idle_gpu_energy_is_unallocated_and_every_joule_is_booked_once() -> None:
    """Ticks 0, 15, 30. GPU-a (held by p): 1000 -> 4000 -> 7000 J, 6000 J to p. GPU-b (nobody): 500 -> 1400
    -> 2300 J, 1800 J unallocated. Conservation: 6000 + 1800 = 7800 = (7000 - 1000) + (2300 - 500)."""
    m = Meter(node="n")
    for t, a, b in ((0.0, 1000.0, 500.0), (15.0, 4000.0, 1400.0), (30.0, 7000.0, 2300.0)):
        tick(m, t, [P], dcgm({"GPU-a": a, "GPU-b": b}))
    assert holder_j(m) == pytest.approx(6000.0)
    assert m.energy.unallocated == {H100: pytest.approx(1800.0)}
    assert holder_j(m) + sum(m.energy.unallocated.values()) == pytest.approx((7000 - 1000) + (2300 - 500))
    assert m.energy.unmeasured_s == 0.0


def test_joules_name_of_dcgm_4_9_reads_the_same() -> None:
    """The same counters under DCGM 4.9's joules name: GPU-b's 1800 J unallocated, p's 6000 J."""
    m = Meter(node="n")
    for t, a, b in ((0.0, 1000.0, 500.0), (15.0, 4000.0, 1400.0), (30.0, 7000.0, 2300.0)):
        tick(m, t, [P], dcgm({"GPU-a": a, "GPU-b": b}, name=J, scale=1.0))
    assert holder_j(m) == pytest.approx(6000.0)
    assert m.energy.unallocated == {H100: pytest.approx(1800.0)}


def test_ended_pod_pays_its_share_and_the_rest_of_the_window_is_unallocated() -> None:
    """p listed at 0 and 15, finished at 22, gone at 30. GPU-a draws 3000 J per 15 s: p pays 3000 (0-15)
    + 3000 x 7 / 15 = 1400 (15-22); unallocated 3000 - 1400 = 1600 of GPU-a, GPU-b 0 (no energy drawn)."""
    m = Meter(node="n")
    life = {("ns", "p"): PodLifetime(start=0.0, finished=22.0, requests={"nvidia.com/gpu": 1})}
    tick(m, 0.0, [P], dcgm({"GPU-a": 0.0, "GPU-b": 0.0}))
    tick(m, 15.0, [P], dcgm({"GPU-a": 3000.0, "GPU-b": 0.0}))
    tick(m, 30.0, [], dcgm({"GPU-a": 6000.0, "GPU-b": 0.0}), lives=life)
    assert holder_j(m) == pytest.approx(3000.0 + 3000.0 * 7 / 15)
    assert m.energy.unallocated[H100] == pytest.approx(1600.0)
    assert holder_j(m) + m.energy.unallocated[H100] == pytest.approx(6000.0)


def test_energy_beyond_the_cap_and_while_holders_are_unknown_is_unobserved() -> None:
    """Ticks 0, 100 (cap 60), 115 (pod-resources down: holders unknown). GPU-a: 0 -> 10000 -> 11500 J.
    At 100: p pays 10000 x 60 / 100 = 6000, unobserved 4000. At 115: all 1500 unobserved.
    GPU-b (4 W idle): 0 -> 400 -> 460: unallocated 400 x 60 / 100 = 240, unobserved 160 + 60 = 220.
    Conservation: 6000 + 240 + 4000 + 1500 + 220 = 11960 = 11500 + 460."""
    m = Meter(node="n")
    tick(m, 0.0, [P], dcgm({"GPU-a": 0.0, "GPU-b": 0.0}))
    tick(m, 100.0, [P], dcgm({"GPU-a": 10000.0, "GPU-b": 400.0}))
    tick(m, 115.0, None, dcgm({"GPU-a": 11500.0, "GPU-b": 460.0}))
    assert holder_j(m) == pytest.approx(6000.0)
    assert m.energy.unallocated[H100] == pytest.approx(240.0)
    assert m.energy.unobserved[H100] == pytest.approx(4000.0 + 1500.0 + 160.0 + 60.0)
    total = holder_j(m) + m.energy.unallocated[H100] + m.energy.unobserved[H100]
    assert total == pytest.approx(11500.0 + 460.0)


def test_gpu_without_the_energy_field_and_dcgm_down_are_unmeasured_seconds() -> None:
    """2 GPUs, ticks every 15 s. 0-30: GPU-b has no energy field: 2 x 15 = 30 s unmeasured. 45: DCGM down:
    both GPUs, 2 x 15 = 30 s. 60: DCGM back, but no reading at 45 to start from: 2 x 15 = 30 s more (GPU-b
    still has no field), and GPU-a's 9000 J over 30-60 are never charged to p. 75: GPU-a measured, GPU-b
    not: 15 s. Total 30 + 30 + 30 + 15 = 105 s; p's energy: 0-30 (2 x 1500 J) + 60-75 (1500 J) = 4500 J."""
    m = Meter(node="n")
    for t, a in ((0.0, 0.0), (15.0, 1500.0), (30.0, 3000.0)):
        tick(m, t, [P], dcgm({"GPU-a": a}))
    assert m.energy.unmeasured_s == pytest.approx(30.0)
    tick(m, 45.0, [P], None)
    assert m.energy.unmeasured_s == pytest.approx(60.0)
    tick(m, 60.0, [P], dcgm({"GPU-a": 12000.0}))
    assert m.energy.unmeasured_s == pytest.approx(90.0)
    tick(m, 75.0, [P], dcgm({"GPU-a": 13500.0}))
    assert m.energy.unmeasured_s == pytest.approx(105.0)
    assert holder_j(m) == pytest.approx(4500.0)
    assert sum(m.energy.unallocated.values()) == 0.0


def test_delta_beyond_the_power_envelope_is_dropped_and_unmeasured() -> None:
    """A counter in mJ read as joules: 15 s x 300 W = 4500 J looks like 4.5e6 J, 300 kW: above 2000 W x
    (15 + 1) s = 32000 J, so GPU-a's interval is unmeasured (15 s) and nothing is charged; 1900 W x 15 s =
    28500 J is believed."""
    assert read_deltas({"GPU-a": 0.0, "GPU-b": 0.0}, dcgm({"GPU-a": 4.5e6, "GPU-b": 0.0}), elapsed=15.0) == {
        "GPU-b": 0.0}
    assert read_deltas({"GPU-a": 0.0}, dcgm({"GPU-a": 28500.0}), elapsed=15.0) == {"GPU-a": 28500.0}
    m = Meter(node="n")
    tick(m, 0.0, [P], dcgm({"GPU-a": 0.0, "GPU-b": 0.0}))
    tick(m, 15.0, [P], dcgm({"GPU-a": 4.5e6, "GPU-b": 0.0}))
    assert holder_j(m) == 0.0 and m.energy.unmeasured_s == pytest.approx(15.0)


def test_snapshot_carries_unallocated_energy_and_unmeasured_seconds_and_refuses_bad_ones() -> None:
    """The wire snapshot: unallocated H100 1800 J (GPU-b 500 -> 2300 J while nobody held it), unmeasured
    0 s; a negative or NaN energy is refused at the door, like every other counter."""
    m = Meter(node="n")
    for t, a, b in ((0.0, 1000.0, 500.0), (15.0, 4000.0, 1400.0), (30.0, 7000.0, 2300.0)):
        tick(m, t, [P], dcgm({"GPU-a": a, "GPU-b": b}))
    snap = snapshot_of(m, 30.0, dcgm_up=True, podresources_up=True)
    (unalloc,) = snap.unallocated
    assert unalloc.gpu_model == H100 and unalloc.energy_j == pytest.approx(1800.0)
    assert snap.unmeasured_energy_s == 0.0
    wire, schema = asdict(snap), TypeAdapter(UsageSnapshot)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValidationError):
            schema.validate_python({**wire, "unallocated": [{**wire["unallocated"][0], "energy_j": bad}]})
        with pytest.raises(ValidationError):
            schema.validate_python({**wire, "unmeasured_energy_s": bad})


def test_energy_counters_survive_a_restart() -> None:
    """Dumped and loaded: unallocated 1800 J and 30 s unmeasured come back (same epoch, no decrease)."""
    m = Meter(node="n")
    for t, b in ((0.0, 500.0), (15.0, 1400.0), (30.0, 2300.0)):
        tick(m, t, [], dcgm({"GPU-b": b}))
    again = load_meter(dump_meter(m), "n")
    assert again.energy.unallocated == {H100: pytest.approx(900.0 + 900.0)}
    assert again.energy.unmeasured_s == pytest.approx(30.0)  # GPU-a, no field, 2 x 15 s
