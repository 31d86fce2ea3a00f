"""AMD device-metrics-exporter: every real capture in tests/fixtures/amd (sources in SOURCES.md) read into
devices with the model, vendor and utilisation read off the capture; partitions without activity and
identity-less virtual functions unmeasured; a prefixed capture read as the unprefixed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.agent.exporters.amd import amd_devices, looks_like_amd
from exporter.clients.exposition import parse_exposition
from tests.conftest import DCGM_FIXTURES

AMD = DCGM_FIXTURES.parent / "amd"
OAM = "AMD Instinct MI300X OAM"


def read(name: str) -> str:
    return (AMD / name).read_text()


def devices(text: str) -> dict[tuple[str, str], tuple[str | None, str, float | None, int]]:
    """key -> (model, vendor, utilisation, partitions)."""
    scrape = amd_devices(parse_exposition(text).samples)
    assert scrape.refused == 0
    return {k: (d.model, d.vendor, d.util, d.partitions) for k, d in scrape.devices.items()}


def test_every_capture_has_its_source() -> None:
    """Each capture is named in SOURCES.md, and each named capture is present."""
    sources = (AMD / "SOURCES.md").read_text()
    listed = {line.split("`")[1] for line in sources.splitlines() if line.startswith("| `")}
    assert {n for n in listed if n.endswith(".txt")} == {p.name for p in AMD.glob("*.txt")}


def test_every_capture_is_recognised_as_amd() -> None:
    """The agent tells device-metrics-exporter from DCGM Exporter by its `gpu_id` label, on every capture."""
    for path in AMD.glob("*.txt"):
        assert looks_like_amd(path.read_text()), path.name
    for path in DCGM_FIXTURES.glob("*.txt"):
        assert not looks_like_amd(path.read_text()), path.name


EXPECTED: dict[str, dict[tuple[str, str], tuple[str | None, str, float | None, int]]] = {
    # one SPX GPU at gfx 0 %: measured 0, keyed by gpu_uuid
    "mi300x_spx_k8s_gfx_activity_rocm7ga_pr236.txt": {
        ("a8ff74a1-0000-1000-807e-843c9b9a1d73", ""): (OAM, "amd", 0.0, 1)},
    # two SPX GPUs (0 %, 100 %) and a CPX partition 0 (0 %) keyed by its GPU's serial and partition
    "mi300x_k8s_pod_and_unallocated_prometheus_scraped_kaiwo.txt": {
        ("ccff74a1-0000-1000-80e0-c6d49f5b0d86", ""): (OAM, "amd", 0.0, 1),
        ("amd:692409005296", "0"): (OAM, "amd", 0.0, 8),
        ("3dff74a1-0000-1000-80d3-0c4c1df1df58", ""): (OAM, "amd", 1.0, 1)},
    # three CPX partitions (6, 7, 1) of one GPU, no activity family: unmeasured
    "mi300x_cpx_partitions_pr316.txt": {
        ("amd:692407005126", "6"): ("102-G30213-0C", "amd", None, 8),
        ("amd:692407005126", "7"): ("102-G30213-0C", "amd", None, 8),
        ("amd:692407005126", "1"): ("102-G30213-0C", "amd", None, 8)},
    # a VF with neither serial nor UUID: its 0 % (and the MI325X VF's 83 %) is not trusted
    "mi300x_vf_amd_prefix_partition_id_4294967295_issue233.txt": {
        ("amd:gpu0", ""): ("Aqua Vanjaram [Instinct MI300X VF]", "amd", None, 1)},
    "mi325x_vf_debian_exporter_kfd_process_id_pr211.txt": {
        ("amd:gpu0", ""): ("Aqua Vanjaram [Instinct MI325X VF]", "amd", None, 1)},
    "mi300x_vf_k8s_empty_serial_card_model_issue171_excerpt.txt": {
        ("17ff74b5-0000-1000-805c-37b0fbe69430", ""): ("Aqua Vanjaram [Instinct MI300X VF]", "amd", None, 1)},
    "mi300_cpx_baremetal_process_cu_occupancy_commit4647248.txt": {
        ("amd:ser_num", "0"): ("Instinct MI300", "amd", None, 8)},
    "mi300x_slurm_job_labels_no_pod_labels_pr16.txt": {
        ("44ff74a1-0000-1000-8005-4617353a63d0", ""): (OAM, "amd", None, 1)},
    "mi300x_spx_ecc_kfd_process_id_deployment_mode_pr368.txt": {
        ("a8ff74a1-0000-1000-807e-843c9b9a1d73", ""): (OAM, "amd", None, 1)},
    "mi35x_violation_low_utilization_xcc_index_pr399.txt": {("amd:ser_num", ""): ("102-G36210-0C", "amd", None, 1)},
    "node_gpu_count_amd_prefix_no_gpu_labels_pr367.txt": {},
    "rx7900xtx_docker_no_partition_issue259_excerpt.txt": {("amd:gpu0", ""): (None, "amd", None, 1)},
    "strix_halo_ai_max_395_igpu_average_package_power_issue353.txt": {("amd:gpu0", ""): (None, "amd", None, 1)},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_devices(name: str) -> None:
    """Each GPU (or partition) of the capture, with its model, vendor, utilisation and partition count."""
    assert devices(read(name)) == EXPECTED[name]


def test_every_capture_is_covered() -> None:
    """No capture escapes the table above (the MI325X 8-GPU one has its own test)."""
    assert set(EXPECTED) | {"mi325x_8gpu_two_pods_pcie_bidirectional_pr201.txt"} == {
        p.name for p in AMD.glob("*.txt")}


def test_mi325x_eight_gpus_two_pods() -> None:
    """PR #201: eight GPUs by gpu_uuid; GPU 0 and 1 carry their pods' labels, the other six none."""
    scrape = amd_devices(parse_exposition(read("mi325x_8gpu_two_pods_pcie_bidirectional_pr201.txt")).samples)
    by_index = {d.index: d for d in scrape.devices.values()}
    assert sorted(by_index) == [str(i) for i in range(8)]
    assert by_index["0"].pods == {("default", "pytorch-resnet50-cifar100", "pytorch-resnet50-cifar100")}
    assert by_index["1"].pods == {("default", "pytorch-vgg256-cifar10", "pytorch-vgg256-cifar10")}
    assert all(not by_index[str(i)].pods for i in range(2, 8))
    assert by_index["0"].gpu_uuid == "9fff74b9-0000-1000-8044-4a2fb30adeb0"


def test_kaiwo_pod_labels_need_a_namespace() -> None:
    """The workload's labels make a holder; the exporter's own pod label from Prometheus (no namespace) does not."""
    scrape = amd_devices(parse_exposition(read("mi300x_k8s_pod_and_unallocated_prometheus_scraped_kaiwo.txt")).samples)
    pods = {k: d.pods for k, d in scrape.devices.items()}
    assert pods[("3dff74a1-0000-1000-80d3-0c4c1df1df58", "")] == {("default", "high-utilization-57ls6", "workload")}
    assert pods[("amd:692409005296", "0")] == set()


@pytest.mark.parametrize("name", ["mi300x_spx_k8s_gfx_activity_rocm7ga_pr236.txt",
                                  "mi300x_k8s_pod_and_unallocated_prometheus_scraped_kaiwo.txt"])
def test_prefixed_capture_reads_the_same(name: str) -> None:
    """`amd_` (or any operator prefix) before every family name changes nothing."""
    text = read(name)
    for prefix in ("amd_", "site_x_"):
        prefixed = "\n".join(prefix + line if line.startswith("gpu_") else line for line in text.splitlines())
        assert devices(prefixed) == devices(text) != {}


def test_prefixed_capture_unprefixed_reads_the_same() -> None:
    """The `amd_`-prefixed VF capture, prefix removed, gives the same device."""
    text = read("mi300x_vf_amd_prefix_partition_id_4294967295_issue233.txt")
    assert devices(text.replace("amd_gpu_", "gpu_")) == devices(text)


def test_cpx_activity_of_other_partitions_is_unmeasured() -> None:
    """CPX: the exporter's gfx activity and power on partitions other than 0 are not theirs (it reads 0):
    unmeasured, not 0 and not partition 0's 40 %. Energy is kept once, on partition 0, in joules."""
    line = ('{name}{{card_series="AMD Instinct MI300X OAM",gpu_compute_partition_type="cpx",gpu_id="{gid}",'
            'gpu_partition_id="{part}",serial_number="S1",namespace="",pod="",container=""}} {value}')
    text = "\n".join([line.format(name="gpu_gfx_activity", gid=0, part=0, value=40),
                      line.format(name="gpu_gfx_activity", gid=3, part=3, value=0),
                      line.format(name="gpu_package_power", gid=0, part=0, value=500),
                      line.format(name="gpu_package_power", gid=3, part=3, value=0),
                      line.format(name="gpu_energy_consumed", gid=0, part=0, value=2.5e12),
                      line.format(name="gpu_used_vram", gid=3, part=3, value=1024)])
    scrape = amd_devices(parse_exposition(text).samples)
    p0, p3 = scrape.devices[("amd:S1", "0")], scrape.devices[("amd:S1", "3")]
    assert (p0.util, p0.power) == (0.4, 500.0) and p0.energy == pytest.approx(2.5e6)
    assert (p3.util, p3.power, p3.energy) == (None, None, None)
    assert p3.fb_used == 1024 * 1048576 and p3.index == "0"


def test_units_converted() -> None:
    """MB (2^20 bytes) -> bytes, percent -> ratio, W as is, microjoules -> joules."""
    labels = 'gpu_id="0",gpu_uuid="u-1",serial_number="S"'
    text = "\n".join(f"{n}{{{labels}}} {v}" for n, v in (("gpu_gfx_activity", 25), ("gpu_used_vram", 2048),
                                                          ("gpu_free_vram", 100), ("gpu_power_usage", 300),
                                                          ("gpu_energy_consumed", 7_000_000)))
    (d,) = amd_devices(parse_exposition(text).samples).devices.values()
    assert (d.util, d.fb_used, d.fb_free, d.power, d.energy) == (0.25, 2048 * 1048576, 100 * 1048576, 300.0, 7.0)


def test_sources_table_names_the_exporter_version() -> None:
    """The docs name device-metrics-exporter with the versions the captures come from."""
    readme = (Path(__file__).resolve().parents[4] / "docs" / "accelerators.md").read_text()
    assert "device-metrics-exporter" in readme and "v1.3.1" in readme


def test_a_partition_id_past_pythons_digit_limit_is_refused_not_raised() -> None:
    """int() of more than 4,300 digits raises ValueError: such a gpu_partition_id is refused like any bad
    label and the rest of the scrape is read (the reader never raises)."""
    long_id = ('gpu_gfx_activity{gpu_id="1",gpu_compute_partition_type="cpx",serial_number="S1",'
               f'gpu_partition_id="{"1" * 5000}"}} 10')
    good = 'gpu_gfx_activity{gpu_id="0",gpu_compute_partition_type="cpx",serial_number="S1",gpu_partition_id="0"} 40'
    scrape = amd_devices(parse_exposition(f"{long_id}\n{good}\n").samples)
    assert scrape.devices[("amd:S1", "0")].util == 0.4
    assert ("amd:S1", "1" * 5000) not in scrape.devices
