"""The build step's output types: who holds what, and where MIG instances live.

Apart from ``attribution`` so the per-mechanism builders (device plugin, HAMi, DRA) can produce them
without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from exporter.model.devices import DeviceKind, SharingMode


@dataclass(frozen=True, slots=True)
class MigLocation:
    """Where a MIG instance lives: its parent GPU and GPU instance id."""

    gpu_uuid: str
    gpu_instance_id: str
    profile: str | None


#: Optional resolver (e.g. NVML) from a MIG UUID to its location; None when it cannot say.
MigResolver = Callable[[str], MigLocation | None]


@dataclass(frozen=True, slots=True)
class Assignment:
    """One container's hold on one device for this tick."""

    namespace: str
    pod: str
    container: str
    device_id: str
    kind: DeviceKind
    gpu_uuid: str  # physical GPU ("" when unresolved)
    dcgm_key: tuple[str, str] | None  # the DCGM device whose utilisation applies
    model: str | None
    mig_profile: str | None
    fraction: float
    sharing: SharingMode = SharingMode.NONE
    claim: str = ""  # the DRA claim it holds the device through (``<namespace>/<name>``); "" otherwise

    @property
    def holder_key(self) -> str:
        """The holder's identity in the meter and the books: namespace/pod/container/device."""
        return f"{self.namespace}/{self.pod}/{self.container}/{self.device_id}"

    @property
    def charge_group(self) -> str:
        """Assignments charged together: every share (replica, HAMi vGPU) of one GPU splits its busy time."""
        if self.kind is DeviceKind.REPLICA:
            return f"shared:{self.gpu_uuid}"
        return f"own:{self.device_id}"


@dataclass(slots=True)
class Attribution:
    """The result of one build step."""

    assignments: list[Assignment] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    learned: dict[str, MigLocation] = field(default_factory=dict)
    sharing: dict[str, SharingMode] = field(default_factory=dict)  # physical GPU uuid -> how it is shared
