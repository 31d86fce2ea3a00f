"""Property-based fuzzing (hypothesis) of every input the daemons take from outside: only the typed
errors escape, and nothing allocates without bound. `fuzz/atheris_targets.py` runs the same targets
under a coverage-guided fuzzer by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from exporter.agent.exporters.dcgm import build_devices
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.agent.state import StateError, load_meter
from exporter.aggregator.ledger.report import ReportError, build_report, parse_time
from exporter.clients.exposition import parse_exposition
from exporter.model.durations import parse_duration
from exporter.model.pod_resources import ContainerDevices
from exporter.model.pricing.document import PricingError, parse_pricing
from exporter.model.usage import parse_snapshot
from exporter.sim.scenario import ScenarioError, parse_scenario

EXAMPLES = 300
json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=2000))
def test_usage_decoder_raw_bytes(body: bytes) -> None:
    """The aggregator's /v1/usage decoder: arbitrary bytes are a snapshot or a ValidationError."""
    try:
        parse_snapshot(body)
    except ValidationError:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.fixed_dictionaries({"node": json_values, "epoch": json_values, "timestamp": json_values,
                              "holders": st.lists(st.dictionaries(
                                  st.sampled_from(["namespace", "pod", "container", "device_id", "fraction",
                                                   "allocated_s", "used_s", "unmeasured_s", "utilization"]),
                                  json_values), max_size=4)}))
@pytest.mark.timeout(180)  # generated snapshots, 26 s on a loaded machine
def test_usage_decoder_shaped_json(doc: dict[str, Any]) -> None:
    """Near-valid snapshots: decoded values respect every bound, or a ValidationError is raised."""
    try:
        snap = parse_snapshot(json.dumps(doc))
    except (ValidationError, ValueError):
        return
    for h in snap.holders:
        assert 0 <= h.fraction <= 1 and h.allocated_s >= 0 and h.used_s >= 0


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=500) | json_values.map(json.dumps))
def test_pricing_file(text: str) -> None:
    """Any pricing text: a Pricing whose prices are finite and non-negative, or one PricingError line."""
    try:
        p = parse_pricing(text, "f.yaml")
    except PricingError as exc:
        assert str(exc).startswith("f.yaml") and "\n" not in str(exc)
        return
    assert p.doc.default_price > 0


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=300))
def test_scenario_file(text: str) -> None:
    """Any scenario text: a scenario or one ScenarioError line naming the file."""
    try:
        parse_scenario(text, "s.yaml")
    except ScenarioError as exc:
        assert str(exc).startswith("s.yaml") and "\n" not in str(exc)


device_ids = st.one_of(st.text(max_size=30), st.from_regex(r"(GPU|MIG)-[0-9a-f-]{1,12}(::[0-9]{1,2})?",
                                                              fullmatch=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.builds(ContainerDevices, st.text(max_size=8), st.text(max_size=8), st.text(max_size=8),
                          st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb",
                                           "nvidia.com/mig-bogus", "amd.com/gpu", ""]),
                          st.lists(device_ids, max_size=4).map(tuple)), max_size=6),
       st.text(max_size=600))
def test_podresources_and_dcgm_handling(held: list[ContainerDevices], dcgm_text: str) -> None:
    """Any pod-resources answer joined with any DCGM text: the tick runs and counters stay sane."""
    devices = build_devices(parse_exposition(dcgm_text).samples)
    m = Meter(node="n")
    for t in (0.0, 15.0):
        m.tick(t, attribute(held, devices, allocatable=None, mig_known=m.mig_known, inventory=m.inventory,
                            extra_resources=["amd.com/gpu"]), dcgm=devices, cap=60.0)
    for h in m.holders.values():
        assert h.usage.allocated >= 0 and 0 <= h.usage.used <= h.usage.allocated + 1e-9


@settings(max_examples=EXAMPLES, deadline=None)
@given(json_values)
def test_agent_state_file(doc: Any) -> None:
    """A corrupt state file is a StateError (new epoch), never a crash."""
    try:
        load_meter(doc if isinstance(doc, dict) else {"x": doc}, "n")
    except StateError:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=20))
def test_report_query_parameters(since: str, until: str, by: str) -> None:
    """Report parameters (CLI flags and /api/v1/report query): rows or a ReportError, nothing else."""
    try:
        s, u = parse_time(since, 1.8e9), parse_time(until, 1.8e9)
        build_report(lambda sql, p: [], by, since=s, until=u)
    except ReportError:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.one_of(st.text(max_size=20), st.floats(), st.integers(), st.booleans(), st.none()))
def test_durations(value: object) -> None:
    """Durations: a finite non-negative number of seconds, or ValueError."""
    try:
        assert parse_duration(value) >= 0
    except ValueError:
        pass


def test_atheris_harness_targets_exist() -> None:
    """The by-hand coverage-guided harness names every target above."""
    text = (Path(__file__).resolve().parents[2] / "fuzz" / "atheris_targets.py").read_text()
    for target in ("usage", "pricing", "scenario", "exposition", "state", "report"):
        assert f'"{target}"' in text
