"""Budgets in the chart and in alert routing: the values become the aggregator's GPUCOST_BUDGETS, and
GPUBudgetForecastExceeded (like GPURightSizingOpportunity) reaches the team's Slack channel (real amtool)."""

from __future__ import annotations

import json
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from exporter.config import AggregatorSettings
from tests.conftest import REPO
from tests.unit.repo.helm_render import CHART, containers_of, env_of, merge, render


def _values() -> dict[str, object]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def _aggregator_env(values: dict[str, object]) -> dict[str, str]:
    pod = render(values).pod("Deployment")
    (container,) = [c for c in containers_of(pod) if c["name"] == "aggregator"]
    return env_of(container)


def test_chart_budgets_reach_the_aggregator_settings() -> None:
    """``budgets: {ai-training: 5000, ai-dev: 1000.5}`` renders GPUCOST_BUDGETS as JSON that the aggregator's
    settings read back as the same amounts; without budgets the variable is absent."""
    env = _aggregator_env(merge(_values(), {"budgets": {"ai-training": 5000, "ai-dev": 1000.5}}))
    assert json.loads(env["GPUCOST_BUDGETS"]) == {"ai-training": 5000, "ai-dev": 1000.5}
    settings = AggregatorSettings.model_validate({"budgets": env["GPUCOST_BUDGETS"]})
    assert settings.budgets == {"ai-training": 5000.0, "ai-dev": 1000.5}
    assert "GPUCOST_BUDGETS" not in _aggregator_env(_values())


@pytest.mark.parametrize("budgets", [{"ai-training": 0}, {"ai-training": -5}, {"ai-training": "5000"},
                                     {"Not_A_Namespace": 10}])
def test_schema_rejects_bad_budgets(budgets: dict[str, object]) -> None:
    """Amounts are numbers > 0; keys are namespace names."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(merge(_values(), {"budgets": {"ai-training": 5000}}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merge(_values(), {"budgets": budgets}), schema)


@pytest.mark.parametrize(("labels", "receiver"), [
    (["alertname=GPUBudgetForecastExceeded", "team=training", "namespace=ai-training"], "slack-gpu-team"),
    (["alertname=GPUAllocatedButIdle", "team=training", "namespace=ai-training"], "slack-gpu-team"),
    (["alertname=GPUBudgetForecastExceeded", "namespace=lab"], "slack-gpu-platform"),  # no team label
    (["alertname=GPURightSizingOpportunity", "team=research", "namespace=lab", "workload=notebook",
      "action=scale_to_zero", "severity=info"], "slack-gpu-team"),
    (["alertname=GPURightSizingOpportunity", "namespace=scratch", "workload=ddp", "action=fewer_gpus",
      "severity=info"], "slack-gpu-platform"),  # no team label
])
def test_budget_alert_routes_to_the_team_channel(labels: list[str], receiver: str) -> None:
    """`amtool config routes test`: the budget and right-sizing alerts go where the idle alert goes (the
    team's channel when the namespace has a team), else to the platform channel."""
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool not installed (Debian's prometheus-alertmanager package)")
    for config in (REPO / "alerts" / "alertmanager.yaml", CHART / "files" / "alertmanager.yaml"):
        proc = subprocess.run([amtool, "config", "routes", "test", f"--config.file={config}", *labels],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == receiver, (config, proc.stdout)
