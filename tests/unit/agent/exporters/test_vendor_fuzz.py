"""Fuzzing (hypothesis) of the new exporter readers: bad units, NaN, duplicate series and missing labels give a
count of refused samples, never an exception, and never a reading under a holder its series did not name."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.agent.exporters.amd import AMD_NAMES, amd_devices, base_name
from exporter.agent.exporters.gaudi import GAUDI_NAMES, gaudi_devices
from exporter.agent.exporters.per_pod import dcgm_pod_use, hami_pod_use
from exporter.agent.holders.attribution import attribute
from exporter.clients.exposition import parse_exposition
from exporter.model.pod_resources import ContainerDevices
from exporter.model.samples import Sample

EXAMPLES = 200
values = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 50.0, -1.0, 1e300])
names = st.sampled_from(["", "amd_", "x_"]).flatmap(
    lambda p: st.sampled_from([p + n for n in AMD_NAMES] + ["pcie_tx", "gpu_nodes_total"]))
pick = st.sampled_from
amd_labels = st.fixed_dictionaries({}, optional={
    "gpu_id": pick(["0", "1", "9", "x", "", "-1", "99999999"]),
    "gpu_partition_id": pick(["0", "1", "7", "8", "NA", "4294967295"]),
    "gpu_compute_partition_type": pick(["spx", "dpx", "qpx", "cpx", "none", ""]),
    "serial_number": pick(["", "S1", "S2"]), "gpu_uuid": pick(["", "0000-0000", "u-1", "u-2"]),
    "card_series": pick(["", "AMD Instinct MI300X OAM"]),
    "namespace": pick(["", "a", "b"]), "pod": pick(["", "p", "q"]), "container": pick(["", "c"])})
amd_samples = st.lists(st.builds(Sample, name=names, labels=amd_labels, value=values), max_size=40)


def bad(value: float) -> bool:
    return math.isnan(value) or math.isinf(value) or value < 0


@settings(max_examples=EXAMPLES, deadline=None)
@given(amd_samples)
def test_amd_reader(samples: list[Sample]) -> None:
    """Every bad value of a family read is refused (counted); a device's holders are exactly the pods its series
    named; utilisation is never negative nor NaN."""
    scrape = amd_devices(samples)
    named = {(s.labels.get("namespace", ""), s.labels.get("pod", ""), s.labels.get("container", ""))
             for s in samples if s.labels.get("namespace") and s.labels.get("pod")}
    bad_values = sum(1 for s in samples if "gpu_id" in s.labels and base_name(s.name) and bad(s.value))
    assert bad_values <= scrape.refused <= len(samples)
    for dev in scrape.devices.values():
        assert dev.pods <= named and dev.vendor == "amd"
        assert dev.util is None or (dev.util >= 0 and not math.isnan(dev.util))


@settings(max_examples=EXAMPLES, deadline=None)
@given(amd_samples, st.lists(st.tuples(pick(["a", "b"]), pick(["p", "q"]), pick(["c", ""]),
                                       pick(["amd.com/gpu", "amd.com/cpx_nps4", "amd.com/weird"]),
                                       st.lists(pick(["0000:19:00.0", "0000:29:00.0", "amdgpu_xcp_3"]),
                                                min_size=1, max_size=3, unique=True)), max_size=4))
def test_amd_attribution_never_a_wrong_holder(samples: list[Sample],
                                              holds: list[tuple[str, str, str, str, list[str]]]) -> None:
    """An assignment carries a device reading only when the exporter labelled that device with its container;
    every fraction is a share of one GPU."""
    devices = amd_devices(samples).devices
    held = [ContainerDevices(ns, pod, ctr, res, tuple(ids)) for ns, pod, ctr, res, ids in holds]
    res = attribute(held, devices, allocatable=None, mig_known={}, inventory={})
    for a in res.assignments:
        assert 0 < a.fraction <= 1
        if a.dcgm_key is not None:
            assert (a.namespace, a.pod, a.container) in devices[a.dcgm_key].pods


gaudi_labels = st.fixed_dictionaries({}, optional={"Serial": pick(["", "S0", "S1"]), "id": pick(["0", "1"]),
                                                   "pod_namespace": pick(["", "a"]), "pod_name": pick(["", "p"])})
gaudi_samples = st.lists(st.builds(Sample, name=pick([*GAUDI_NAMES, "habanalabs_energy", "habanalabs_x"]),
                                   labels=gaudi_labels, value=values), max_size=30)


@settings(max_examples=EXAMPLES, deadline=None)
@given(gaudi_samples)
def test_gaudi_reader(samples: list[Sample]) -> None:
    """Samples without a Serial and bad values are refused; a card is only ever keyed by its own Serial; energy
    (unit undocumented) is never read."""
    scrape = gaudi_devices(samples)
    no_serial = sum(1 for s in samples if not s.labels.get("Serial"))
    bad_values = sum(1 for s in samples if s.labels.get("Serial") and s.name in GAUDI_NAMES and bad(s.value))
    assert no_serial + bad_values <= scrape.refused <= len(samples)
    for (serial, _), dev in scrape.devices.items():
        assert dev.gpu_uuid == serial and dev.energy is None


per_pod_labels = st.fixed_dictionaries({}, optional={
    "UUID": pick(["", "GPU-1", "GPU-2"]), "pod_uid": pick(["", "u1", "u2"]), "namespace": pick(["", "n"]),
    "pod": pick(["", "p", "q"]), "GPU_I_ID": pick(["", "1"]), "device_uuid": pick(["", "GPU-1"]),
    "container": pick(["c", "d"]), "vdevice_index": pick(["0", "1"])})
per_pod_samples = st.lists(st.builds(Sample, name=pick(["DCGM_FI_DEV_GPU_UTIL",
                                                        "hami_container_device_utilization_ratio"]),
                                     labels=per_pod_labels, value=values), max_size=30)


@settings(max_examples=EXAMPLES, deadline=None)
@given(per_pod_samples)
def test_per_pod_readers(samples: list[Sample]) -> None:
    """Measured values are finite and non-negative, and belong to a pod a series named on that GPU."""
    for use in (dcgm_pod_use(samples), hami_pod_use(samples)):
        assert use.refused <= len(samples)
        for gpu, pods in use.by_gpu.items():
            for (ns, pod), value in pods.items():
                assert math.isfinite(value) and value >= 0
                assert any(s.labels.get("namespace") == ns and s.labels.get("pod") == pod
                           and gpu in (s.labels.get("UUID"), s.labels.get("device_uuid")) for s in samples)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    """Any body through the exposition parser and each reader: no exception."""
    samples = parse_exposition(text).samples
    amd_devices(samples)
    gaudi_devices(samples)
    dcgm_pod_use(samples)
    hami_pod_use(samples)
