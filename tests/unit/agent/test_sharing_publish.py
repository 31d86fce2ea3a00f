"""Each holder's sharing mode travels to the ``/v1/usage`` snapshot and through the state file; it is a
label, not the counter's identity: a holder whose mode changes keeps counting where it was."""

from __future__ import annotations

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import attribute
from exporter.agent.holders.dra import DeviceKey, SliceDevice
from exporter.agent.holders.sharing import STRATEGY_LABEL, NodeContext
from exporter.agent.meter import Meter
from exporter.agent.publish import snapshot_of
from exporter.agent.state import dump_meter, load_meter
from exporter.model.pod_resources import ClaimDevice, ContainerClaim, ContainerDevices

A100 = "NVIDIA A100-SXM4-80GB"
G0, G1, G2 = "GPU-0000", "GPU-1111", "GPU-2222"
DCGM = {(g, ""): DcgmDevice(gpu_uuid=g, index=str(i), model=A100, gr_engine=0.5) for i, g in enumerate((G0, G1, G2))}
HELD = [ContainerDevices("ml", "whole", "main", "nvidia.com/gpu", (G0,)),
        ContainerDevices("ml", "rep", "main", "nvidia.com/gpu", (f"{G1}::0",))]
CLAIMS = [ContainerClaim("ml", "dra", "main", "ml", "c", (ClaimDevice("gpu.nvidia.com", "node-a", "gpu-2"),))]
SLICES = {DeviceKey("gpu.nvidia.com", "node-a", "gpu-2"): SliceDevice("gpu", G2)}


def _tick(m: Meter, now: float, strategy: str) -> None:
    ctx = NodeContext(labels={STRATEGY_LABEL: strategy}, dra_slices=SLICES)
    m.tick(now, attribute(HELD, DCGM, allocatable=None, mig_known={}, inventory={}, context=ctx, claims=CLAIMS),
           dcgm=DCGM, cap=60.0)


def _sharing(m: Meter, now: float) -> dict[str, tuple[str, float]]:
    snap = snapshot_of(m, now, dcgm_up=True, podresources_up=True)
    return {h.pod: (h.sharing, h.allocated_s) for h in snap.holders}


def test_sharing_mode_on_the_wire_and_through_a_restart() -> None:
    """15 s on each device: a whole GPU is none, a replica on an MPS-labelled node mps, a DRA claim's GPU dra
    (1 x 15 = 15 GPU-s each: one replica of unknown count is the whole GPU). The state file keeps the mode;
    an older state file (no ``sharing``) restores "" (unknown)."""
    m = Meter(node="n")
    for now in (0.0, 15.0):
        _tick(m, now, "mps")
    assert _sharing(m, 15.0) == {"whole": ("none", 15.0), "rep": ("mps", 15.0), "dra": ("dra", 15.0)}
    state = dump_meter(m)
    assert {h.pod: h.sharing for h in load_meter(state, "n").holders.values()} == {
        "whole": "none", "rep": "mps", "dra": "dra"}
    for row in state["holders"]:
        del row["sharing"]
    assert {h.sharing for h in load_meter(state, "n").holders.values()} == {""}


def test_a_changed_mode_keeps_the_counters() -> None:
    """The node's label turns the replica from time-slicing to MPS: the holder's key is the same, so its counter
    goes on from 15 to 15 + 15 = 30 GPU-s (not from 0) and the snapshot names the new mode."""
    m = Meter(node="n")
    for now in (0.0, 15.0):
        _tick(m, now, "time-slicing")
    assert _sharing(m, 15.0)["rep"] == ("time-slicing", 15.0)
    _tick(m, 30.0, "mps")
    assert _sharing(m, 30.0)["rep"] == ("mps", 30.0)
    assert len(m.holders) == 3
