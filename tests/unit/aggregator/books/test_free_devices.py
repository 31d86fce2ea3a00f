"""The devices a node advertises, from the node objects the simulator's Kubernetes API serves (its
``status.allocatable``, as the device plugin fills it) through ``KubeState`` into the ledger's rows."""

from __future__ import annotations

from exporter.aggregator.books.free_devices import book_devices
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.rows import TickWrite
from exporter.sim.kube.objects import node_object
from exporter.sim.layout import node_layout
from exporter.sim.scenario import parse_scenario

A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
H0 = 20833 * 86400
NODES = f"""
tick: 15s
duration: 1h
prices: {{"{A100}": 2.5, "{L4}": 0.8}}
nodes:
  - {{name: mixed, model: "{A100}", gpus: 2, mig: {{0: [1g.10gb, 1g.10gb, 3g.40gb]}}}}
  - {{name: sliced, model: "{L4}", gpus: 2, time_slicing: 4}}
  - {{name: renamed, model: "{L4}", gpus: 1, time_slicing: 4, time_slicing_rename: true}}
  - {{name: single, model: "{A100}", gpus: 1, labels: {{nvidia.com/mig.strategy: single}}}}
pods: []
"""


def _kube() -> KubeState:
    kube = KubeState()
    for spec in parse_scenario(NODES, "nodes.yaml").nodes:
        kube.handle("nodes", "ADDED", obj=node_object(node_layout(spec), created=0.0))
    return kube


def _booked(kube: KubeState, node: str, models: list[str], hours: list[int]) -> dict[DeviceKey, int]:
    w = TickWrite()
    book_devices(w, kube, node=node, models=models, hours=hours, at=H0 + 1800.0)
    return w.node_devices


def test_mig_instances_whole_gpus_and_replicas_by_kind() -> None:
    kube = _kube()
    assert _booked(kube, "mixed", [A100], [H0]) == {
        DeviceKey(H0, "mixed", A100, "1g.10gb", 0): 2, DeviceKey(H0, "mixed", A100, "3g.40gb", 0): 1,
        DeviceKey(H0, "mixed", A100, "", 0): 1}
    assert _booked(kube, "sliced", [L4], [H0, H0 + 3600]) == {
        DeviceKey(H0, "sliced", L4, "", 4): 8, DeviceKey(H0 + 3600, "sliced", L4, "", 4): 8}
    assert _booked(kube, "renamed", [L4], []) == {DeviceKey(H0, "renamed", L4, "", 4): 4}  # the hour of ``at``


def test_what_cannot_be_read_as_a_kind_is_left_out() -> None:
    """The MIG single strategy advertises instances as nvidia.com/gpu (not whole GPUs); a node whose GPU model
    the snapshot and the label do not settle, and a deleted node, advertise nothing."""
    kube = _kube()
    assert _booked(kube, "single", [A100], [H0]) == {}
    assert _booked(kube, "mixed", [A100, L4], [H0]) == {}  # two models, and the label names neither
    kube.handle("nodes", "DELETED", obj={"metadata": {"name": "sliced"}})
    assert _booked(kube, "sliced", [L4], [H0]) == {}
