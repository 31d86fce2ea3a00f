"""What a node's kubelet pod-resources API answers, from the scenario's placement at the current time.

Kept apart from the gRPC servicer so the answer can be computed (and benchmarked) without a socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.sim.spec import PodSpec


@dataclass(frozen=True, slots=True)
class PodDevices:
    """One pod the kubelet lists and the device IDs its container holds."""

    pod: PodSpec
    devices: list[str]


def list_answer(pods: list[PodSpec], *, node: str, t: float, devices: dict[tuple[str, str], list[str]],
                lists_terminated: bool) -> list[PodDevices]:
    """The List answer: running pods, plus finished ones on kubelets that still list them (before 1.34)."""
    listed = [p for p in pods if p.node == node and p.start <= t
              and (p.end is None or t < p.end or lists_terminated)]
    return [PodDevices(p, devices.get((p.namespace, p.name), [])) for p in listed]
