"""Devices built from DCGM samples: the real DCGM Exporter captures in tests/fixtures/dcgm (sources in
SOURCES.md) carry the values read off the capture; the metric-name table converts units and never guesses one."""

from __future__ import annotations

import pytest

from exporter.agent.exporters.dcgm import build_devices, parse_name_table
from exporter.clients.exposition import parse_exposition
from tests.conftest import DCGM_FIXTURES


def _fixture(name: str) -> str:
    return (DCGM_FIXTURES / name).read_text()


def test_every_fixture_has_its_source() -> None:
    """Each capture is named in SOURCES.md (where it came from), and each named capture is present."""
    sources = (DCGM_FIXTURES / "SOURCES.md").read_text()
    first_cells = [line.split("`")[1] for line in sources.splitlines() if line.startswith("| `")]
    listed = {cell for cell in first_cells if cell.endswith(".txt")}
    assert listed == {p.name for p in DCGM_FIXTURES.glob("*.txt")}


def test_l4_full_scrape_values() -> None:
    """L4 capture: one GPU, GR engine 0, GPU_UTIL 0, 16.365 W, energy 4742776 mJ = 4742.776 J, no pods."""
    devs = build_devices(parse_exposition(_fixture("l4_gpu-operator_full_scrape_default_counters.txt")).samples)
    assert len(devs) == 1
    (dev,) = devs.values()
    assert dev.model == "NVIDIA L4" and dev.mig_profile is None
    assert dev.gr_engine == 0.0 and dev.util == 0.0
    assert dev.power == pytest.approx(16.365)
    assert dev.energy == pytest.approx(4742.776)
    assert dev.pods == set()


def test_h100_mig_pod_labels() -> None:
    """H100 MIG 1g.10gb instances 7, 8, 9; 7 and 9 carry KServe pod labels, 8 none."""
    devs = build_devices(parse_exposition(_fixture("h100_mig_1g10gb_k8s_pod_labels_issue512_excerpt.txt")).samples)
    uuid = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"
    assert sorted(devs) == [(uuid, "7"), (uuid, "8"), (uuid, "9")]
    assert devs[(uuid, "7")].pods == {("model-playground-stg",
                                       "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
                                       "kserve-container")}
    assert devs[(uuid, "8")].pods == set()
    assert all(d.mig_profile == "1g.10gb" and d.gr_engine == 0.0 for d in devs.values())


def test_a100_mig_doc_sample_whole_and_instance() -> None:
    """A100 doc sample: whole GPU GR engine 0.995630, FB used 4845 MiB; instance 13 (1g.5gb) 0.995687."""
    devs = build_devices(parse_exposition(_fixture("a100_mig_1g5gb_gpu_and_gpu_instance_nvidia_docs.txt")).samples)
    uuid = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
    whole, inst = devs[(uuid, "")], devs[(uuid, "13")]
    assert whole.gr_engine == pytest.approx(0.995630) and whole.fb_used == 4845 * 1048576
    assert whole.model is None  # this older label set has no modelName
    assert inst.mig_profile == "1g.5gb" and inst.gr_engine == pytest.approx(0.995687)


def test_lowercase_hostname_and_old_empty_pod_labels() -> None:
    """2026 builds use `hostname`; 2022 builds carry empty pod labels, which mean 'no pod'."""
    devs = build_devices(parse_exposition(
        _fixture("mixed_rtx2000ada_a30mig_k8s_pods_lowercase_hostname_pr736_excerpt1.txt")).samples)
    mig = devs[("GPU-63bc0b91-2265-1b94-831c-15c41fe92675", "3")]
    assert mig.pods == {("default", "triton-server-f7cb5d77-95xcf", "triton-server")}
    assert mig.fb_free == 2207 * 1048576
    old = build_devices(parse_exposition(_fixture("titanv_old_labels_empty_pod_labels_issue58_excerpt.txt")).samples)
    assert len(old) == 5 and all(d.pods == set() and d.model == "NVIDIA TITAN V" for d in old.values())


def test_name_table_units_and_ranges() -> None:
    """Classic names convert %, MiB and mJ; 4.9 names are ratios, bytes and joules; extras come from settings."""
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="M"} 42\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="M"} 2\n'
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",modelName="M"} 5000\n'
        'DCGM_FI_DEV_GPU_UTIL_RATIO{gpu="1",UUID="GPU-b",modelName="M"} 0.25\n'
        'DCGM_FI_DEV_FB_USED_BYTES{gpu="1",UUID="GPU-b",modelName="M"} 1024\n'
        'DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL{gpu="1",UUID="GPU-b",modelName="M"} 7\n'
        'MY_UTIL_PERMILLE{gpu="2",UUID="GPU-c",modelName="M"} 500\n'
    )
    table = {**build_devices.__globals__["DEFAULT_NAME_TABLE"], **parse_name_table("MY_UTIL_PERMILLE=util:0.001")}
    devs = build_devices(parse_exposition(text).samples, table)
    a, b, c = devs[("GPU-a", "")], devs[("GPU-b", "")], devs[("GPU-c", "")]
    assert a.util == pytest.approx(0.42) and a.fb_used == 2 * 1048576 and a.energy == pytest.approx(5.0)
    assert (b.util, b.fb_used, b.energy) == (0.25, 1024, 7)
    assert c.util == pytest.approx(0.5)
    with pytest.raises(ValueError, match="bad metric-name entry"):
        parse_name_table("X=bogus")


def test_gr_engine_preferred_and_mig_instances_separate() -> None:
    """GR engine activity wins over GPU_UTIL; MIG instances are separate devices; pod labels are kept."""
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="M"} 90\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a",modelName="M"} 0.3\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-b",modelName="M",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",'
        'exported_namespace="ns",exported_pod="p",exported_container="c"} 0.6\n'
    )
    devs = build_devices(parse_exposition(text).samples)
    assert devs[("GPU-a", "")].utilization_raw == 0.3
    mig = devs[("GPU-b", "7")]
    assert (mig.mig_profile, mig.utilization_raw, mig.pods) == ("1g.10gb", 0.6, {("ns", "p", "c")})


@pytest.mark.parametrize(("name", "help_text", "expected"), [
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE_RATIO", "", ("gr_engine", 1.0)),
    ("DCGM_FI_DEV_GPU_UTIL_PERCENT", "", ("util", 0.01)),
    ("DCGM_FI_DEV_GPU_UTILIZATION", "GPU utilization (in %).", ("util", 0.01)),
    ("DCGM_FI_DEV_FB_USED_MIB", "", ("fb_used", 1048576.0)),
    ("DCGM_FI_DEV_FB_FREE_CAPACITY", "Framebuffer free (in bytes).", ("fb_free", 1.0)),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_MILLIJOULES", "", ("energy", 0.001)),
    ("DCGM_FI_DEV_BOARD_POWER", "Power draw (in W).", ("power", 1.0)),
    ("DCGM_FI_DEV_GPU_TEMP_C", "GPU temperature (in °C).", ("temp", 1.0)),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT_WATTS", "", None),  # a limit, not a draw
    ("DCGM_FI_DEV_GPU_TEMP_LIMIT_CELSIUS", "", None),
    ("DCGM_FI_DEV_GPU_UTIL_SAMPLES", "(in %)", None),
    ("DCGM_FI_DEV_GPU_UTIL_X", "no unit given", None),  # a unit is never guessed
    ("DCGM_FI_DEV_SM_CLOCK_HZ", "", None),
    ("my_gpu_util_ratio", "", None),
])
def test_infer_renamed_fields(name: str, help_text: str, expected: tuple[str, float] | None) -> None:
    """Renamed DCGM fields are recognised by stem, their unit by suffix or HELP; never guessed."""
    from exporter.agent.exporters.dcgm import infer_name_entry

    assert infer_name_entry(name, help_text) == expected
