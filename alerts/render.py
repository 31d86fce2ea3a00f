#!/usr/bin/env python3
"""Render the chart's rule template (helm/gpu-cost-exporter/files/alert-rules.tmpl.yaml) with thresholds.

The chart's PrometheusRule does the same substitution with ``.Values.alerts``; this script writes the
plain rule file in alerts/ from the chart's default values, and the e2e test renders it with shortened
durations. Usage: ``python alerts/render.py [--check]``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "helm" / "gpu-cost-exporter"
TEMPLATE = CHART / "files" / "alert-rules.tmpl.yaml"
RENDERED = REPO / "alerts" / "gpu-cost-exporter.rules.yaml"

#: placeholder -> key under .Values.alerts
PLACEHOLDERS = {
    "__EVALUATION_INTERVAL__": "evaluationInterval",
    "__IDLE_FOR_SECONDS__": "idleForSeconds",
    "__IDLE_COST_BURN_PER_HOUR__": "idleCostBurnPerHour",
    "__BURN_WINDOW__": "idleCostBurnWindow",
    "__BURN_FOR__": "idleCostBurnFor",
    "__QUOTA_RATIO__": "quotaRatio",
    "__QUOTA_FOR__": "quotaFor",
    "__PENDING_FOR__": "pendingFor",
    "__AGENT_DOWN_FOR__": "agentDownFor",
    "__DCGM_DOWN_FOR__": "dcgmDownFor",
    "__LEDGER_STALE_SECONDS__": "ledgerStaleSeconds",
    "__LEDGER_STALE_FOR__": "ledgerStaleFor",
    "__RIGHTSIZING_MONTHLY_SAVINGS__": "rightSizingMonthlySavings",
    "__BUDGET_FORECAST_FOR__": "budgetForecastFor",
    "__RUNBOOK_BASE__": "runbookBaseUrl",
}


def default_thresholds() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return dict(values["alerts"]["thresholds"])


def render(overrides: dict[str, Any] | None = None) -> str:
    thresholds = {**default_thresholds(), **(overrides or {})}
    text = TEMPLATE.read_text()
    for placeholder, key in PLACEHOLDERS.items():
        text = text.replace(placeholder, str(thresholds[key]))
    left = re.findall(r"__[A-Z_]+__", text)
    if left:
        raise ValueError(f"unrendered placeholders: {sorted(set(left))}")
    return text


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if RENDERED.read_text() != text:
            print(f"{RENDERED} is stale: run python alerts/render.py", file=sys.stderr)
            return 1
        return 0
    RENDERED.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
