"""Rules, Alertmanager config and dashboards: generated copies are current, and the real tools accept them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

ALERTS = REPO / "alerts"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (Debian's prometheus / prometheus-alertmanager packages)")
    return path


def test_rendered_rules_and_dashboards_are_current() -> None:
    """alerts/*.rules.yaml and both dashboard copies equal what their generators produce now."""
    for script in (ALERTS / "render.py", REPO / "dashboards" / "generate.py"):
        proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr


def test_promtool_check_and_test_rules() -> None:
    """`promtool check rules` and `promtool test rules` (every alert fires and stays silent when it should)."""
    promtool = _tool("promtool")
    check = subprocess.run([promtool, "check", "rules", str(ALERTS / "gpu-cost-exporter.rules.yaml")],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([promtool, "test", "rules", str(ALERTS / "tests" / "rules_test.yaml")],
                          capture_output=True, text=True, check=False)
    assert test.returncode == 0, test.stdout + test.stderr


def test_every_alert_has_a_promtool_test_and_a_runbook() -> None:
    """No alert ships without a unit test and a runbook page."""
    rules = (ALERTS / "gpu-cost-exporter.rules.yaml").read_text()
    tests = (ALERTS / "tests" / "rules_test.yaml").read_text()
    alerts = re.findall(r"- alert: (\w+)", rules)
    assert len(alerts) == 12
    for alert in alerts:
        assert f"alertname: {alert}" in tests, alert
    urls = re.findall(r"runbooks/([\w-]+)/\"", rules)
    assert len(urls) == len(alerts)
    for url in urls:
        assert (REPO / "docs" / "runbooks" / f"{url}.md").is_file(), url


def test_amtool_check_config() -> None:
    """The example Alertmanager config and its Slack templates pass `amtool check-config`."""
    amtool = _tool("amtool")
    proc = subprocess.run([amtool, "check-config", str(ALERTS / "alertmanager.yaml")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "api_url_file" in (ALERTS / "alertmanager.yaml").read_text()
    assert "hooks.slack.com" not in (ALERTS / "alertmanager.yaml").read_text()


def test_dashboards_are_current_grafana_json() -> None:
    """Datasource as a variable, cluster/namespace/pool/model variables, no deprecated `graph` panels, and
    every metric a panel uses is produced by the exporter or the recording rules."""
    produced = set(re.findall(r'"(gpucost_[a-z0-9_]+)"', "".join(
        p.read_text() for p in (REPO / "exporter").rglob("*.py"))))
    produced |= {n + "_total" for n in produced}
    recorded = set(re.findall(r"record: ([\w:]+)", (ALERTS / "gpu-cost-exporter.rules.yaml").read_text()))
    for path in (REPO / "dashboards").glob("*.json"):
        d = json.loads(path.read_text())
        names = [v["name"] for v in d["templating"]["list"]]
        assert names[:5] == ["datasource", "cluster", "namespace", "pool", "gpu_model"], path.name
        for panel in d["panels"]:
            assert panel["type"] != "graph" and panel["datasource"]["uid"] == "${datasource}"
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            for t in panel["targets"]:
                for metric in re.findall(r"\b(gpucost_[a-z0-9_]+|namespace:gpucost_[\w:]+)", t["expr"]):
                    assert metric in produced or metric in recorded, (path.name, metric)


def _target(dashboard: str, title: str, ref: str = "A") -> str:
    """A panel's query as Prometheus gets it with every variable set to "All"."""
    d = json.loads((REPO / "dashboards" / f"{dashboard}.json").read_text())
    panel = next(p for p in d["panels"] if p["title"] == title)
    expr: str = next(t["expr"] for t in panel["targets"] if t["refId"] == ref)
    return (expr.replace("$cluster", ".*").replace("$namespace", ".*").replace("$pool", ".*")
            .replace("$gpu_model", ".*"))


SAVINGS = "gpucost_recommendation_monthly_savings"
SERIES = [  # what the aggregator exports: savings per workload (730-hour month), budgets and forecasts per namespace
    (f'{SAVINGS}{{namespace="lab",workload="notebook",action="scale_to_zero"}}', 2920.0),  # 730 h x 4.00
    (f'{SAVINGS}{{namespace="lab",workload="nb-2",action="scale_to_zero"}}', 1460.0),  # 730 h x 2.00
    (f'{SAVINGS}{{namespace="lab",workload="serve",action="smaller_gpu"}}', 730.0),  # 730 h x (4.00 - 3.00)
    (f'{SAVINGS}{{namespace="ml",workload="api",action="mig"}}', 500.0),
    ('gpucost_budget{namespace="ai-training"}', 10000.0),
    ('gpucost_forecast_month_cost{namespace="ai-training"}', 12500.0),
    ('gpucost_budget{namespace="ai-dev"}', 5000.0),
    ('gpucost_forecast_month_cost{namespace="ai-dev"}', 2000.0),
    ('gpucost_forecast_month_cost{namespace="no-budget"}', 800.0),
]


def _sample(labels: str, value: float) -> dict[str, Any]:
    return {"labels": labels, "value": value}


def test_savings_and_budgets_dashboard_computes_by_hand(tmp_path: Path) -> None:
    """The "Savings & budgets" panels' queries, evaluated by `promtool test rules` on known series."""
    promtool = _tool("promtool")
    dash = "gpu-savings-budgets"
    cases = [
        (_target(dash, "Monthly savings on offer"), [_sample("{}", 2920.0 + 1460.0 + 730.0 + 500.0)]),
        (_target(dash, "Right-sizing actions on offer"), [_sample("{}", 4)]),
        (_target(dash, "Monthly savings by namespace and action"), [
            _sample('{namespace="lab",action="scale_to_zero"}', 2920.0 + 1460.0),
            _sample('{namespace="lab",action="smaller_gpu"}', 730.0),
            _sample('{namespace="ml",action="mig"}', 500.0)]),
        (_target(dash, "Right-sizing actions, biggest saving first"),
         [_sample(series, value) for series, value in SERIES if series.startswith(SAVINGS)]),
        (_target(dash, "Savings on offer over time by action"), [
            _sample('{action="scale_to_zero"}', 2920.0 + 1460.0), _sample('{action="smaller_gpu"}', 730.0),
            _sample('{action="mig"}', 500.0)]),
        # ai-training: 12,500 > 10,000; ai-dev within; no-budget has no budget to exceed
        (_target(dash, "Namespaces forecast over budget"), [_sample("{}", 1)]),
        (_target(dash, "Month-end forecast, all budgeted namespaces"), [_sample("{}", 12500.0 + 2000.0)]),
        (_target(dash, "Month-end forecast, all budgeted namespaces", "B"), [_sample("{}", 10000.0 + 5000.0)]),
        (_target(dash, "Month-end forecast as a share of the budget"), [
            _sample('{namespace="ai-training"}', 12500.0 / 10000.0), _sample('{namespace="ai-dev"}', 2000.0 / 5000.0)]),
        (_target(dash, "Month-end forecast and budget per namespace", "B"), [
            _sample('gpucost_budget{namespace="ai-training"}', 10000.0),
            _sample('gpucost_budget{namespace="ai-dev"}', 5000.0)]),
    ]
    nothing = [(_target(dash, "Monthly savings on offer"), [_sample("{}", 0.0)]),  # no action on offer: 0, not empty
               (_target(dash, "Right-sizing actions on offer"), [_sample("{}", 0.0)])]
    (tmp_path / "none.rules.yaml").write_text("groups: []\n")

    def group(series: list[tuple[str, float]], tests: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
        return {"interval": "1m", "input_series": [{"series": s, "values": f"{v}x5"} for s, v in series],
                "promql_expr_test": [{"expr": e, "eval_time": "2m", "exp_samples": x} for e, x in tests]}

    spec = {"rule_files": ["none.rules.yaml"], "evaluation_interval": "1m",
            "tests": [group(SERIES, cases), group([('gpucost_budget{namespace="ai-dev"}', 5000.0)], nothing)]}
    (tmp_path / "dash_test.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run([promtool, "test", "rules", "dash_test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_savings_and_budgets_dashboard_is_shipped() -> None:
    """Generated beside the others and into the chart, with the title the issue names."""
    for folder in (REPO / "dashboards", REPO / "helm" / "gpu-cost-exporter" / "files" / "dashboards"):
        d = json.loads((folder / "gpu-savings-budgets.json").read_text())
        assert d["title"] == "Savings & budgets" and d["uid"] == "gpucost-savings"
