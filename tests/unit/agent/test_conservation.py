"""Conservation over random tick sequences: every second of the node's capacity since ``started_at``
lands in exactly one bucket (a holder's allocated time, unallocated, or unobserved)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.model.holding import PodLifetime
from exporter.model.pod_resources import ContainerDevices

H100 = "NVIDIA H100 80GB HBM3"
GPUS = 2  # GPU-a (whole) and GPU-b (time-sliced into 4 replicas)
ALLOCATABLE = {"nvidia.com/gpu": ("GPU-a",), "nvidia.com/gpu.shared": tuple(f"GPU-b::{k}" for k in range(4))}
PODS = {  # pod -> (resource, device): every pod its own device, so nothing is ever held twice
    "p0": ("nvidia.com/gpu", "GPU-a"), "p1": ("nvidia.com/gpu.shared", "GPU-b::0"),
    "p2": ("nvidia.com/gpu.shared", "GPU-b::1"), "p3": ("nvidia.com/gpu.shared", "GPU-b::2"),
}
CAP = 60.0

step = st.fixed_dictionaries({
    "gap": st.integers(min_value=0, max_value=300),
    "dcgm_up": st.booleans(),
    "podresources_up": st.booleans(),
    "present": st.frozensets(st.sampled_from(sorted(PODS))),
    "watch": st.booleans(),
    "util": st.floats(min_value=-0.5, max_value=1.5) | st.just(float("nan")),
    "start_back": st.integers(min_value=-40, max_value=400),  # startTime of new pods, before now
    "end_back": st.integers(min_value=-40, max_value=400),  # finishedAt of gone pods, before now
    "short": st.none() | st.tuples(st.integers(0, 300), st.integers(0, 300)),  # an unlisted pod
})


def _dcgm(util: float) -> dict[tuple[str, str], DcgmDevice]:
    return {(u, ""): DcgmDevice(gpu_uuid=u, index=str(i), model=H100, gr_engine=util)
            for i, u in enumerate(("GPU-a", "GPU-b"))}


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(step, min_size=1, max_size=25), allocatable_from=st.integers(0, 30))
def test_allocated_plus_unallocated_plus_unobserved_is_capacity_times_wall_time(
        steps: list[dict], allocatable_from: int) -> None:  # type: ignore[type-arg]
    """Gaps beyond the cap, DCGM and pod-resources up and down, pods coming and going with and without
    the watch's times (some skewed), short pods only the watch saw, GetAllocatableResources answering
    only from step ``allocatable_from`` on: Σ allocated + Σ unallocated + Σ unobserved - oversubscribed
    = 2 GPUs x (last tick - started_at), to 1e-6. Oversubscription only happens while the replica count
    is unknown (a replica then reads as a whole GPU); with it known from the start, it is 0."""
    m = Meter(node="n")
    now = 1_000.0
    lives: dict[tuple[str, str], PodLifetime] = {}
    prev_present: frozenset[str] = frozenset()
    n_short = 0
    for i, s in enumerate(steps):
        last = now
        now += s["gap"]
        for pod in s["present"] - prev_present:
            lives[("ns", pod)] = PodLifetime(start=now - s["start_back"], requests={PODS[pod][0]: 1})
        for pod in prev_present - s["present"]:
            old = lives.get(("ns", pod))
            lives[("ns", pod)] = PodLifetime(start=old.start if old else None, finished=now - s["end_back"],
                                             requests={PODS[pod][0]: 1})
        if s["short"] is not None and not s["present"] >= {"p1", "p2", "p3"} | {"p0"}:
            a, b = sorted(s["short"])
            n_short += 1
            # the fourth replica: free whatever else runs
            lives[("ns", f"short-{n_short}")] = PodLifetime(
                start=last + a * s["gap"] / 300, finished=last + b * s["gap"] / 300,
                requests={"nvidia.com/gpu.shared": 1})
        prev_present = s["present"] if s["podresources_up"] else prev_present
        dcgm = _dcgm(s["util"]) if s["dcgm_up"] else None
        held = [ContainerDevices("ns", p, "c", PODS[p][0], (PODS[p][1],)) for p in sorted(s["present"])]
        alloc = ALLOCATABLE if i >= allocatable_from else None  # the agent keeps it once it has it
        attribution = attribute(held, dcgm, allocatable=alloc, mig_known=m.mig_known,
                                inventory=m.inventory) if s["podresources_up"] else None
        m.tick(now, attribution, dcgm=dcgm, cap=CAP, allocatable=alloc, lifetimes=lives if s["watch"] else None,
               skew=15.0)
    allocated = sum(h.usage.allocated for h in m.holders.values())
    total = allocated + sum(m.unallocated.values()) + sum(m.unobserved.values())
    expected = 0.0 if m.started_at is None or m.last_tick is None else GPUS * (m.last_tick - m.started_at)
    if allocatable_from == 0:
        assert m.oversubscribed_total <= 1e-6
    assert abs(total - m.oversubscribed_total - expected) <= 1e-6, (total, m.oversubscribed_total, expected)
    for h in m.holders.values():
        u = h.usage
        assert min(u.allocated, u.used, u.unmeasured) >= 0 and u.used + u.unmeasured <= u.allocated + 1e-9
