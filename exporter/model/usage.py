"""The ``/v1/usage`` wire schema: the one contract between the agent and the aggregator.

Both sides import this module; neither imports the other. Counters are cumulative and monotonic
within one ``epoch``; a new epoch means the agent lost its state and started again from zero.

Every float must be finite and non-negative: a NaN or infinite value from a broken or hostile agent
is refused at the door (``allow_inf_nan=False``) instead of poisoning the running totals for ever.
Conservation: over any interval between two snapshots of one epoch, Σ holders' ``allocated_s`` +
Σ ``unallocated`` + Σ ``unobserved`` advance by (physical GPUs x wall seconds); Σ holders' ``energy_j``
+ Σ ``unallocated`` and ``unobserved`` ``energy_j`` advance by the DCGM energy counters' deltas of the
GPUs measured, and ``unmeasured_energy_s`` by the GPU-seconds of the others.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, field_validator
from pydantic.dataclasses import dataclass

#: Bounds that keep a hostile or broken agent from making the aggregator allocate without limit.
MAX_NAME = 253
MAX_HOLDERS = 20_000
#: How a holder's GPU is shared, as the agent labels its device metrics; "" is unknown (an older agent).
SHARING_MODES = frozenset({"none", "time-slicing", "mps", "hami", "dra", "kai"})
#: Slotted frozen dataclasses, not models: the aggregator keeps every node's latest snapshot, and a model
#: instance carries a ``__dict__`` and a set of the fields it was given (about 1.6 KB a holder against 0.3 KB).
_WIRE = ConfigDict(extra="ignore", allow_inf_nan=False)
_T = TypeVar("_T")


def _keywords_only(cls: type[_T]) -> type[_T]:
    """Refuse positional arguments at run time too: pydantic's dataclasses take them, in an order of their own
    (fields with a plain default last), so a value given by position would land in another field."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: _T, **fields: Any) -> None:
        init(self, **fields)

    setattr(cls, "__init__", __init__)  # noqa: B010 (mypy refuses assigning to a method)
    return cls


@_keywords_only
@dataclass(frozen=True, slots=True, kw_only=True, config=_WIRE)
class HolderCounters:
    """Cumulative GPU-seconds of one (namespace, pod, container, device)."""

    namespace: str = Field(max_length=MAX_NAME)
    pod: str = Field(max_length=MAX_NAME)
    container: str = Field(max_length=MAX_NAME)
    device_id: str = Field(max_length=MAX_NAME)
    gpu_uuid: str = Field(default="", max_length=MAX_NAME)
    gpu_model: str | None = Field(default=None, max_length=MAX_NAME)
    mig_profile: str | None = Field(default=None, max_length=64)
    fraction: float = Field(ge=0, le=1)
    active: bool = True
    allocated_s: float = Field(ge=0)
    used_s: float = Field(ge=0)
    unmeasured_s: float = Field(ge=0)
    energy_j: float = Field(default=0.0, ge=0)
    utilization: float | None = Field(default=None, ge=0, le=1)
    #: Peak framebuffer bytes used during the clock hour starting at ``fb_peak_hour`` (epoch seconds), for
    #: right-sizing. None where DCGM does not measure it per holder (time-sliced and other shared devices).
    #: A maximum, not a counter: booking it twice changes nothing.
    fb_peak_bytes: float | None = Field(default=None, ge=0)
    fb_peak_hour: int | None = Field(default=None, ge=0)
    #: The DRA ResourceClaim (``<namespace>/<name>``) the device is held through; "" for device-plugin
    #: holders. A label of the counters, not part of their identity (``key``).
    claim: str = Field(default="", max_length=2 * MAX_NAME + 1)
    #: How the device's GPU is shared (one of ``SHARING_MODES``); "" from an agent that does not say. A label,
    #: not part of the identity either: a holder whose mode changes keeps its counters.
    sharing: str = ""
    #: Of ``allocated_s``, the seconds on a busy shared GPU whose busy time was split by fraction for want of
    #: measured per-pod use (0 from an agent that does not say; ignored by an aggregator that does not read it).
    split_s: float = Field(default=0.0, ge=0)

    @field_validator("sharing", mode="before")
    @classmethod
    def _known_sharing(cls, value: Any) -> str:
        """A mode this build does not know (a newer agent's) books as unknown rather than refusing the snapshot."""
        return value if isinstance(value, str) and value in SHARING_MODES else ""

    def key(self) -> str:
        """The holder's identity (namespace/pod/container/device), as the meter keys it."""
        return f"{self.namespace}/{self.pod}/{self.container}/{self.device_id}"


@_keywords_only
@dataclass(frozen=True, slots=True, kw_only=True, config=_WIRE)
class UnallocatedCounter:
    """Cumulative GPU-seconds of capacity nobody held, per GPU model on this node, and the energy DCGM
    measured on that capacity (joules; 0 from an agent that does not measure it)."""

    gpu_model: str = Field(max_length=MAX_NAME)
    seconds: float = Field(ge=0)
    energy_j: float = Field(default=0.0, ge=0)


@_keywords_only
@dataclass(frozen=True, slots=True, kw_only=True, config=_WIRE)
class GpuCapacity:
    """One physical GPU the agent knows of."""

    gpu_uuid: str = Field(max_length=MAX_NAME)
    gpu_model: str = Field(max_length=MAX_NAME)
    index: str = Field(default="", max_length=16)
    utilization: float | None = Field(default=None, ge=0, le=1)
    held_fraction: float = Field(default=0.0, ge=0)


@_keywords_only
@dataclass(frozen=True, slots=True, kw_only=True, config=_WIRE)
class UsageSnapshot:
    """What ``GET /v1/usage`` returns."""

    node: str = Field(min_length=1, max_length=MAX_NAME)
    epoch: str = Field(min_length=1, max_length=64)
    timestamp: float = Field(ge=0)
    #: When this epoch's counters started covering the node (the epoch's first tick); time before it
    #: and after the previous epoch's last booked snapshot was observed by no one.
    started_at: float | None = Field(default=None, ge=0)
    seq: int = 0
    dcgm_up: bool = True
    podresources_up: bool = True
    holders: list[HolderCounters] = Field(default_factory=list, max_length=MAX_HOLDERS)
    unallocated: list[UnallocatedCounter] = Field(default_factory=list, max_length=1024)
    #: Capacity time this agent could not observe (past the charge cap, pod-resources unreachable),
    #: cumulative per GPU model, same shape as ``unallocated``.
    unobserved: list[UnallocatedCounter] = Field(default_factory=list, max_length=1024)
    capacity: list[GpuCapacity] = Field(default_factory=list, max_length=1024)
    #: GPU-seconds (physical GPUs x wall seconds, cumulative) whose energy DCGM did not measure: a device
    #: without the energy field, DCGM down, an impossible reading. Their energy is priced at nothing, so
    #: it is counted instead (``gpucost_unmeasured_energy_seconds_total``).
    unmeasured_energy_s: float = Field(default=0.0, ge=0)


_SNAPSHOT = TypeAdapter(UsageSnapshot)


def parse_snapshot(body: bytes | str) -> UsageSnapshot:
    """A ``/v1/usage`` body, validated (raises ``pydantic.ValidationError``)."""
    return _SNAPSHOT.validate_json(body)


def snapshot_json(snapshot: UsageSnapshot) -> bytes:
    """The ``/v1/usage`` body of ``snapshot``."""
    return _SNAPSHOT.dump_json(snapshot)
