"""The right-sizing rules' inputs (what a workload held and did, what the cluster offers) and their answer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.rightsizing.evidence import UtilHistogram

#: Hours in a month, for every monthly amount.
HOURS_PER_MONTH = 730.0


class Action(StrEnum):
    """What to do with a workload."""

    SCALE_TO_ZERO = "scale_to_zero"
    FEWER_GPUS = "fewer_gpus"
    MIG = "mig"
    TIME_SLICE = "time_slice"
    SMALLER_GPU = "smaller_gpu"


@dataclass(frozen=True, slots=True)
class Placement:
    """What one pod of a workload holds: ``gpus`` devices of one kind (whole GPU, MIG profile or replica)."""

    gpu_model: str
    mig_profile: str | None = None
    gpus: int = 1
    replicas: int | None = None  # time-sliced: the GPU is split into this many replicas

    @property
    def share(self) -> float:
        """Compute share of one physical GPU each device gives (1, N/slices, or 1/replicas)."""
        if self.mig_profile:
            return profile_slices(self.mig_profile) / gpu_slices(self.gpu_model, self.mig_profile)
        if self.replicas:
            return 1.0 / self.replicas
        return 1.0


@dataclass(frozen=True, slots=True)
class Offer:
    """A device kind the cluster provides, with its price per device-hour (what booking charged for it, or for
    a free one its node's effective rate)."""

    placement: Placement  # gpus is ignored: an offer is one device
    hourly_price: float
    free: bool = False  # the cluster had it free (advertised, nobody held it): wins a tie


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """One device a pod held over the window: its utilisation and its framebuffer peak (None: not measured)."""

    utilization: UtilHistogram
    framebuffer_peak_bytes: int | None


@dataclass(frozen=True, slots=True)
class PodUse:
    """The devices one pod of the workload held."""

    pod: str
    devices: tuple[DeviceUse, ...]


@dataclass(frozen=True, slots=True)
class WorkloadUse:
    """A workload's evidence over the window: its pods pooled, and what booking charged for them."""

    namespace: str
    workload: str
    placement: Placement
    pods: tuple[PodUse, ...]
    allocated_device_hours: float
    booked_cost: float
    hours_observed: float
    currency: str


@dataclass(frozen=True, slots=True)
class RuleSettings:
    """Thresholds of the rules (defaults are the documented ones)."""

    idle_threshold: float = 0.05  # p95 below this for the whole window: idle
    headroom: float = 0.8  # p95 compute rescaled to the target must stay at or below this share of it
    memory_margin: float = 1.2  # framebuffer peak x this must fit the target's memory
    min_evidence_hours: float = 24.0


@dataclass(frozen=True, slots=True)
class Evidence:
    """The numbers a recommendation stands on."""

    util_p50: float | None
    util_p95: float | None
    framebuffer_peak_bytes: int | None
    hours_observed: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One action for one workload and the money it moves, per 730-hour month."""

    namespace: str
    workload: str
    action: Action
    current: Placement
    target: Placement
    evidence: Evidence
    monthly_cost_now: float
    monthly_cost_after: float
    currency: str
    reason: str

    @property
    def monthly_savings(self) -> float:
        """Monthly cost now minus after, in ``currency``; negative when the action costs more."""
        return self.monthly_cost_now - self.monthly_cost_after
