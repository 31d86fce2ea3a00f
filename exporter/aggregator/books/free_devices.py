"""Book the devices a node advertised in the hours a snapshot covers, so the ledger can show capacity
nobody held (seven carved 1g.10gb instances on an idle A100) and right-sizing can offer it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.rows import TickWrite
from exporter.model.books import hour_of

_MIG = "nvidia.com/mig-"


def _replicas(labels: Mapping[str, str]) -> int:
    try:
        return max(0, int(labels.get("nvidia.com/gpu.replicas", "0")))
    except ValueError:
        return 0


def device_kinds(resources: Mapping[str, int], labels: Mapping[str, str]) -> dict[tuple[str, int], int]:
    """(MIG profile, replicas) -> devices: ``nvidia.com/mig-P`` instances of profile P; ``nvidia.com/gpu``
    whole GPUs, or replicas when the node is labelled with ``nvidia.com/gpu.replicas`` above 1;
    ``nvidia.com/gpu.shared`` replicas. Left out: shared replicas whose count is unlabelled, and
    ``nvidia.com/gpu`` under the MIG ``single`` strategy (MIG instances of a profile no label spells out)."""
    replicas = _replicas(labels)
    out: dict[tuple[str, int], int] = {}
    for name, count in resources.items():
        if name.startswith(_MIG):
            kind = (name.removeprefix(_MIG), 0)
        elif name == "nvidia.com/gpu" and labels.get("nvidia.com/mig.strategy") != "single":
            kind = ("", replicas if replicas > 1 else 0)
        elif name == "nvidia.com/gpu.shared" and replicas > 1:
            kind = ("", replicas)
        else:
            continue
        out[kind] = out.get(kind, 0) + count
    return out


def book_devices(w: TickWrite, kube: KubeState, *, node: str, models: Iterable[str], hours: Iterable[int],
                 at: float) -> None:
    """The node's advertised devices in each of ``hours`` (the snapshot's hour ``at`` when none), under its one
    GPU model (on a mixed node, the model its label names); nothing when the model is not known."""
    resources = kube.node_devices.get(node) if node in kube.nodes else None
    if not resources:
        return
    known = sorted(set(models))
    model = known[0] if len(known) == 1 else kube.model_of_node(node)
    if not model or (known and model not in known):
        return
    kinds = device_kinds(resources, kube.nodes[node])  # the same in every hour the snapshot covers
    for hour in set(hours) or {hour_of(at)}:
        for (profile, replicas), count in kinds.items():
            w.node_devices[DeviceKey(hour, node, model, profile, replicas)] = count
