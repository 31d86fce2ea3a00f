"""What the kubelet says each container holds: plain types, read by the pod-resources client and joined
with DCGM's devices by the pure attribution (which therefore needs no client module)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """Devices of one resource held by one container."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One device of a DRA claim, as the kubelet names it."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerClaim:
    """A DRA claim one container names, with every device of the claim (the kubelet does not filter)."""

    namespace: str
    pod: str
    container: str
    claim_namespace: str
    claim_name: str
    devices: tuple[ClaimDevice, ...]
