#!/usr/bin/env python3
"""Coverage-guided fuzzing of the daemons' inputs with atheris (run by hand, not in CI):

    pip install atheris
    python fuzz/atheris_targets.py usage -atheris_runs=200000
    python fuzz/atheris_targets.py exposition -max_total_time=300

Targets: usage (the aggregator's /v1/usage decoder), pricing, scenario, exposition (the DCGM parser and
device builder), state (the agent's state file), report (report window/grouping parameters). Only the
typed errors may escape; anything else is a finding.
"""

from __future__ import annotations

import json
import sys

import atheris

with atheris.instrument_imports():
    from pydantic import ValidationError

    from exporter.agent.exporters.dcgm import build_devices
    from exporter.agent.state import StateError, load_meter
    from exporter.aggregator.ledger.report import ReportError, build_report, parse_time
    from exporter.clients.exposition import parse_exposition
    from exporter.model.pricing.document import PricingError, parse_pricing
    from exporter.model.usage import parse_snapshot
    from exporter.sim.scenario import ScenarioError, parse_scenario


def _text(data: bytes) -> str:
    text: str = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))
    return text


def usage(data: bytes) -> None:
    try:
        parse_snapshot(data)
    except ValidationError:
        pass


def pricing(data: bytes) -> None:
    try:
        parse_pricing(_text(data), "f")
    except PricingError:
        pass


def scenario(data: bytes) -> None:
    try:
        parse_scenario(_text(data), "f")
    except ScenarioError:
        pass


def exposition(data: bytes) -> None:
    build_devices(parse_exposition(_text(data)).samples)


def state(data: bytes) -> None:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return
    try:
        load_meter(doc if isinstance(doc, dict) else {}, "n")
    except StateError:
        pass


def report(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    try:
        build_report(lambda sql, p: [], fdp.ConsumeUnicodeNoSurrogates(16),
                     since=parse_time(fdp.ConsumeUnicodeNoSurrogates(32), 1.8e9), until=None)
    except ReportError:
        pass


TARGETS = {"usage": usage, "pricing": pricing, "scenario": scenario, "exposition": exposition, "state": state,
           "report": report}

if __name__ == "__main__":
    name = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1] in TARGETS else "usage"
    atheris.Setup(sys.argv, TARGETS[name])
    atheris.Fuzz()
