"""Pricing validation, scenario validation (one clear line, exit 2), and the import layers."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.model.pricing import PricingError, parse_pricing
from exporter.sim.scenario import ScenarioError, load_scenario
from tests.conftest import REPO


def test_pricing_lookup() -> None:
    """Model price, default for unknown models (flagged), pool multiplier, MIG instance override."""
    p = parse_pricing("""
currency: EUR
default_price: 1.5
models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.1}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.35}}
pools: {spot: 0.4}
""", "p.yaml")
    assert p.currency == "EUR"
    assert p.price("NVIDIA H100 80GB HBM3").per_gpu_hour == 4.0
    unknown = p.price("NVIDIA B200")
    assert (unknown.per_gpu_hour, unknown.known) == (1.5, False)
    assert p.price("NVIDIA H100 80GB HBM3", pool="spot").per_gpu_hour == pytest.approx(1.6)
    # 0.35 per 1g.10gb instance-hour = 0.35 / (1/7) = 2.45 per GPU-hour equivalent
    assert p.price("NVIDIA A100-SXM4-80GB", "1g.10gb").per_gpu_hour == pytest.approx(2.45)
    assert p.price("NVIDIA A100-SXM4-80GB", "3g.40gb").per_gpu_hour == 2.1


@pytest.mark.parametrize(("text", "message"), [
    ("currency: USD\n", "p.yaml: field default_price: Field required"),
    ("default_price: 0\n", "p.yaml: field default_price: Input should be greater than 0"),
    ("default_price: 1\nmodels: {A: -3}\n", "p.yaml: field models:"),
    ("default_price: 1\nmodles: {}\n", "p.yaml: field modles: Extra inputs are not permitted"),
    ("default_price: 1\nmig_profiles: {A: {banana: 1}}\n", "not a MIG profile"),
    ("[1, 2]\n", "p.yaml: expected a mapping"),
    ("a: [\n", "p.yaml: not valid YAML/JSON"),
])
def test_invalid_pricing(text: str, message: str) -> None:
    """Every invalid pricing document names the file and field."""
    with pytest.raises(PricingError, match=message.replace("[", r"\[")):
        parse_pricing(text, "p.yaml")


def test_aggregator_exits_2_on_invalid_pricing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid pricing file stops the aggregator at start with one line and exit code 2."""
    bad = tmp_path / "pricing.yaml"
    bad.write_text("default_price: -1\n")
    assert main(["aggregator", "--pricing-file", str(bad), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "default_price" in err[0]
    assert not (tmp_path / "l.db").exists()


BASE = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes:
  - {name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}
"""


@pytest.mark.parametrize(("extra", "message"), [
    ("pods: [{name: p, namespace: a, node: nope, gpus: 1}]", "scenario.yaml: pods[0].node: unknown node 'nope'"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 3}]",
     "scenario.yaml: pods[0].gpus: 3 nvidia.com/gpu requested, node n0 has 2"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, resource: nvidia.com/mig-1g.10gb}]",
     "scenario.yaml: pods[0].resource: node n0 offers no nvidia.com/mig-1g.10gb"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, start: soon}]",
     "scenario.yaml: pods[0].start: not a duration: 'soon'"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 1, utilization: 1.5}]",
     "scenario.yaml: pods[0].utilization: 1.5 is out of range"),
    ("pods: [{name: p, namespace: a, node: n0, gpus: 2}, {name: q, namespace: a, node: n0, gpus: 1}]",
     "scenario.yaml: pods[1].gpus: node n0 has only 0 free nvidia.com/gpu at 0s"),
    ("events: [{type: dcgm_down, node: n0, from: 5m}]", "scenario.yaml: events[0].to: required for dcgm_down"),
    ("bogus: 1", "scenario.yaml: bogus: unknown field"),
])
def test_bad_scenarios(write_scenario: Callable[[str], Path], extra: str, message: str) -> None:
    """A bad scenario fails with one line naming the file and field."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(BASE + extra))
    assert str(info.value).startswith(message)


def test_unpriced_model_needs_default(write_scenario: Callable[[str], Path]) -> None:
    """A model with no price and no default_price is an error (a GPU is never free)."""
    path = write_scenario("nodes: [{name: n0, model: Mystery GPU, gpus: 1}]\n")
    with pytest.raises(ScenarioError, match=re.escape("nodes[0].model: 'Mystery GPU' has no price")):
        load_scenario(path)


def test_mig_on_too_many_slices(write_scenario: Callable[[str], Path]) -> None:
    """MIG profiles that need more slices than the GPU has are rejected."""
    path = write_scenario(BASE.replace("gpus: 2}", "gpus: 2, mig: {0: [4g.40gb, 4g.40gb]}}"))
    with pytest.raises(ScenarioError, match=re.escape("nodes[0].mig.0: profiles need 8 slices")):
        load_scenario(path)


def test_cli_bad_scenario_exit_2(write_scenario: Callable[[str], Path], tmp_path: Path) -> None:
    """`simulate` with a bad scenario: one stderr line, exit 2, no ledger written."""
    path = write_scenario(BASE + "pods: [{name: p, namespace: a, node: n0, gpus: 9}]")
    ledger = tmp_path / "out.db"
    proc = subprocess.run([sys.executable, "-m", "exporter", "simulate", "--scenario", str(path), "--ledger",
                           str(ledger)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "pods[0].gpus" in proc.stderr
    assert not ledger.exists()


def test_cli_unknown_flag_and_missing_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Unknown flags and unreadable scenarios exit 2 with one line."""
    with pytest.raises(SystemExit) as info:
        main(["report", "--bogus"])
    assert info.value.code == 2
    assert main(["simulate", "--scenario", str(tmp_path / "none.yaml"), "--ledger", str(tmp_path / "l.db")]) == 2
    assert "none.yaml: cannot read" in capsys.readouterr().err


def test_default_scenario_is_valid() -> None:
    """The built-in scenario loads: four pools (research: spot and committed GPUs), a pending pod, a
    quota rejection."""
    s = load_scenario(REPO / "exporter" / "sim" / "scenarios" / "default.yaml")
    assert {n.labels["gpu.platform/pool"] for n in s.nodes} == {"training", "inference", "dev", "research"}
    assert any(p.node is None for p in s.pods)
    assert any(e.type == "quota_rejection" for e in s.events)


def test_generated_stubs_are_current(tmp_path: Path) -> None:
    """The committed gRPC stubs are what regenerate.sh produces from the .proto today."""
    pytest.importorskip("grpc_tools")
    from grpc_tools import protoc

    rc = protoc.main(["protoc", f"-I{REPO}", f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
                      str(REPO / "exporter/clients/proto/podresources_v1.proto")])
    assert rc == 0
    def essence(text: str) -> str:
        """What the .proto determines: the serialized descriptor and the stubs, minus tool-version stamps."""
        descriptor = re.findall(r"AddSerializedFile\((b'.*?')\)", text)
        lines = [ln for ln in text.splitlines()
                 if "Version" not in ln and "VERSION" not in ln and not re.match(r"\s+_runtime_version|\s+\d+,", ln)]
        return "\n".join(descriptor) + "\n".join(lines)

    for name in ("podresources_v1_pb2.py", "podresources_v1_pb2_grpc.py"):
        fresh = (tmp_path / "exporter/clients/proto" / name).read_text()
        committed = (REPO / "exporter/clients/proto" / name).read_text()
        assert essence(fresh) == essence(committed), f"{name} is stale: run regenerate.sh"
