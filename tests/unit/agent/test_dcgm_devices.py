"""The real DCGM Exporter captures in tests/fixtures/dcgm (sources in SOURCES.md): each parses like
prometheus-client parses it, and the devices built from it carry the values read off the capture."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.agent.dcgm_devices import build_devices
from exporter.clients.exposition import parse_exposition
from tests.conftest import DCGM_FIXTURES


def _fixture(name: str) -> str:
    return (DCGM_FIXTURES / name).read_text()


def test_every_fixture_parses_like_prometheus_client() -> None:
    """Every captured file parses with no errors and to the same samples as prometheus-client."""
    paths = sorted(DCGM_FIXTURES.glob("*.txt"))
    assert len(paths) == 7  # every capture listed in SOURCES.md
    for path in paths:
        text = path.read_text()
        ours = parse_exposition(text)
        assert ours.errors == 0, path.name
        # prometheus-client appends _total to counters that lack it; DCGM's counters lack it.
        theirs = [(s.name.removesuffix("_total"), s.labels, s.value)
                  for f in text_string_to_metric_families(text) for s in f.samples]
        assert [(s.name.removesuffix("_total"), s.labels, s.value) for s in ours.samples] == theirs, path.name


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
