"""KAI Scheduler fractions, pure: recognising the reservation pod, reading a sharer's share, and handing the
reserved GPU to the sharers of its group. Fractions by hand."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.exporters.per_pod import dcgm_pod_use
from exporter.agent.holders.attribution import attribute
from exporter.agent.holders.kai import KaiSharer, kai_assignments, kai_sharer, parse_portion, reservation_group
from exporter.agent.holders.sharing import NodeContext
from exporter.agent.lifecycle import lifetime_of
from exporter.clients.exposition import parse_exposition
from exporter.model.devices import DeviceKind, SharingMode
from exporter.model.pod_resources import ContainerDevices
from tests.unit.agent.exporters.test_measured import DEV, L4, hour, pod_line, used_hours

H100 = "NVIDIA H100 80GB HBM3"
G0, G1 = "GPU-0000", "GPU-1111"
NS = "kai-resource-reservation"


def pod(ns: str, name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        containers: tuple[str, ...] = ("main",), phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": c} for c in containers]}, "status": {"phase": phase}}


RESERVATION = pod(NS, "gpu-reservation-9c1e0a7b52d4f3aa", labels={"app": NS, "runai-gpu-group": "g0"})


@pytest.mark.parametrize(("obj", "namespace", "group"), [
    (RESERVATION, NS, "g0"),
    (pod(NS, "gpu-reservation-gpu-node-12-x7k2q", labels={"app": NS, "runai-gpu-group": "g0"}), NS, "g0"),  # < 0.16
    (pod("runai-reservation", "gpu-reservation-abc", labels={"app": NS, "runai-gpu-group": "g0"}),
     "runai-reservation", "g0"),  # the configured (pre-0.6) namespace
    (pod("team-a", "gpu-reservation-abc", labels={"app": NS, "runai-gpu-group": "g0"}), NS, None),  # wrong namespace
    (pod(NS, "gpu-reservation-abc", labels={"runai-gpu-group": "g0"}), NS, None),  # no app label
    (pod(NS, "reservation-abc", labels={"app": NS, "runai-gpu-group": "g0"}), NS, None),  # not the prefix
    (pod(NS, "gpu-reservation-abc", labels={"app": NS}), NS, ""),  # unlabelled: a reservation of no group
])
def test_reservation_pod_is_namespace_label_and_name_prefix(obj: dict[str, Any], namespace: str,
                                                            group: str | None) -> None:
    assert reservation_group(obj, namespace=namespace) == group


def test_sharer_reads_groups_portion_and_container() -> None:
    """One device: ``runai-gpu-group``; several: one ``runai-gpu-group/<id>`` each; the fraction's container is
    the annotated one (index 1: its ConfigMap is ``<base>-1``), else the first."""
    one = kai_sharer(pod("team-a", "a", labels={"runai-gpu-group": "g0"}, annotations={"gpu-fraction": "0.5"}))
    assert one == KaiSharer("team-a", "a", "main", 0, frozenset({"g0"}), 0.5, None, "")
    multi = kai_sharer(pod("team-d", "w", labels={"runai-gpu-group/g0": "g0", "runai-gpu-group/g1": "g1"},
                           annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}))
    assert multi is not None and multi.groups == {"g0", "g1"}
    mem = kai_sharer(pod("team-c", "m", labels={"runai-gpu-group": "g0"}, containers=("side", "train"),
                         annotations={"gpu-memory": "40960", "gpu-fraction-container-name": "train",
                                      "runai/shared-gpu-configmap": "m-x1-shared-gpu"}))
    assert mem is not None and (mem.container, mem.fraction, mem.memory_mib) == ("train", None, 40960.0)
    assert mem.configmap_name == "m-x1-shared-gpu-1"
    assert kai_sharer(pod("team-a", "plain", labels={"runai-gpu-group": "g0"})) is None  # asks for nothing
    assert kai_sharer(pod("team-a", "nogroup", annotations={"gpu-fraction": "0.5"})) is None  # not yet bound


@pytest.mark.parametrize(("text", "value"), [("0.50", 0.5), ("1", 1.0), ("0", None), ("1.5", None), ("x", None),
                                             ("nan", None), (None, None)])
def test_parse_portion(text: object, value: float | None) -> None:
    assert parse_portion(text) == value


SHARERS = (KaiSharer("team-a", "a", "main", 0, frozenset({"g0"}), 0.5, None),
           KaiSharer("team-b", "b", "main", 0, frozenset({"g0"}), 0.25, None),
           KaiSharer("team-c", "m", "main", 0, frozenset({"g1"}), None, 40960.0, "m-cm"),
           KaiSharer("team-x", "other-node", "main", 0, frozenset({"g9"}), 0.5, None))
HELD = [ContainerDevices(NS, "gpu-reservation-0", "resource-reservation", "nvidia.com/gpu", (G0,)),
        ContainerDevices(NS, "gpu-reservation-1", "resource-reservation", "nvidia.com/gpu", (G1,))]
RES = {(NS, "gpu-reservation-0"): "g0", (NS, "gpu-reservation-1"): "g1"}


def _assign(portions: dict[tuple[str, str], float], memory: float | None) -> list[tuple[str, str, float]]:
    out = kai_assignments(HELD, reservations=RES, sharers=SHARERS, portions=portions,
                          gpu_memory_mib=lambda _gpu: memory, dcgm_keys={(G0, ""), (G1, "")},
                          model_of=lambda _gpu: H100)
    assert out.gpus == {G0, G1}
    return [(a.pod, a.gpu_uuid, a.fraction) for a in out.assignments]


def test_reserved_gpu_goes_to_its_group_by_portion() -> None:
    """G0: a 0.5, b 0.25 (0.25 left unallocated); G1: m's GPU_PORTION 0.50. The reservation pods hold nothing."""
    assert _assign({("team-c", "m"): 0.5}, memory=81559.0) == [("a", G0, 0.5), ("b", G0, 0.25), ("m", G1, 0.5)]


def test_memory_pod_without_portion_is_memory_over_gpu_memory_else_unresolved() -> None:
    """No ConfigMap read: 40960 / 81920 MiB = 0.5; the GPU's memory unknown too: not charged, unresolved."""
    assert _assign({}, memory=81920.0)[-1] == ("m", G1, 0.5)
    out = kai_assignments(HELD, reservations=RES, sharers=SHARERS, portions={}, gpu_memory_mib=lambda _g: None,
                          dcgm_keys=set(), model_of=lambda _g: H100)
    assert [a.pod for a in out.assignments] == ["a", "b"] and out.unresolved == [f"team-c/m/{G1}"]


def test_attribution_charges_sharers_and_labels_the_gpu_kai() -> None:
    """Through ``attribute``: the reservation pod has no assignment, the sharers are replicas of G0 (they split
    its busy time), G0 and G1 (reserved, no sharer yet: all unallocated) are shared ``kai``."""
    ctx = NodeContext(kai_reservations=RES, kai_sharers=SHARERS[:2])
    dcgm = {(g, ""): DcgmDevice(gpu_uuid=g, index=str(i), model=H100, gr_engine=0.5) for i, g in enumerate((G0, G1))}
    result = attribute(HELD, dcgm, allocatable=None, mig_known={}, inventory={}, context=ctx)
    assert [(a.namespace, a.pod, a.kind, a.fraction, a.sharing) for a in result.assignments] == [
        ("team-a", "a", DeviceKind.REPLICA, 0.5, SharingMode.KAI), ("team-b", "b", DeviceKind.REPLICA, 0.25,
                                                                    SharingMode.KAI)]
    assert result.sharing == {G0: SharingMode.KAI, G1: SharingMode.KAI}


def test_without_the_pod_objects_the_reservation_holds_its_gpu() -> None:
    """No API (empty context): the reservation pod is an ordinary holder; nothing is guessed."""
    result = attribute(HELD[:1], None, allocatable=None, mig_known={}, inventory={}, context=NodeContext())
    assert [(a.namespace, a.fraction) for a in result.assignments] == [(NS, 1.0)]


def test_measured_per_pod_use_splits_the_busy_time_as_for_time_slicing() -> None:
    """One GPU KAI-shared by a (0.5) and b (0.25) for an hour, the device at 70 %, dcgm-exporter's per-pod
    series a 60 %, b 10 %: busy 0.7 GPU-h; a's share 60/70 x 0.7 = 0.6, capped at its 0.5 -> 0.5 used;
    b 10/70 x 0.7 = 0.1. Without per-pod series, by portion: a 0.7 x 0.5/0.75 = 0.4667, b 0.2333."""
    held = [ContainerDevices(NS, "gpu-reservation-0", "resource-reservation", "nvidia.com/gpu", (L4,))]
    ctx = NodeContext(kai_reservations={(NS, "gpu-reservation-0"): "g0"}, kai_sharers=(
        KaiSharer("ml", "a", "main", 0, frozenset({"g0"}), 0.5, None),
        KaiSharer("ml", "b", "main", 0, frozenset({"g0"}), 0.25, None)))
    body = "\n".join([f"DCGM_FI_DEV_GPU_UTIL{{{DEV}}} 70", pod_line(60, "a", "uid-a", vgpu="0"),
                      pod_line(10, "b", "uid-b", vgpu="0")])
    measured = hour(body, held, dcgm_pod_use(parse_exposition(body).samples).by_gpu, context=ctx)
    assert used_hours(measured) == {"a": pytest.approx((0.5, 0.5)), "b": pytest.approx((0.25, 0.1))}
    by_portion = hour(f"DCGM_FI_DEV_GPU_UTIL{{{DEV}}} 70", held, {}, context=ctx)
    assert used_hours(by_portion) == {"a": pytest.approx((0.5, 0.7 * 0.5 / 0.75)),
                                      "b": pytest.approx((0.25, 0.7 * 0.25 / 0.75))}


def test_reservation_pod_between_two_ticks_is_not_charged_its_request() -> None:
    """A pod that lived between two ticks is charged its request; KAI's reservation pod requests nothing of its
    own (its nvidia.com/gpu: 1 is its sharers'), so it never bills kai-resource-reservation."""
    res = {**RESERVATION, "spec": {"containers": [{"name": "resource-reservation", "resources": {
        "limits": {"nvidia.com/gpu": "1"}}}]}}
    assert lifetime_of(res, extra=(), deleted_seen=None, before=None).requests == {}
    other = {**res, "metadata": {**res["metadata"], "namespace": "team-a"}}
    assert lifetime_of(other, extra=(), deleted_seen=None, before=None).requests == {"nvidia.com/gpu": 1}
