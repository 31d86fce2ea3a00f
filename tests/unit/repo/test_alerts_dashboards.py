"""Rules, Alertmanager config and dashboards: generated copies are current, and the real tools accept them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

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
    assert len(alerts) == 9
    for alert in alerts:
        assert f"alertname: {alert}" in tests, alert
    for url in re.findall(r"runbooks/([\w-]+\.md)", rules):
        assert (REPO / "docs" / "runbooks" / url).is_file(), url


def test_amtool_check_config() -> None:
    """The example Alertmanager config and its Slack templates pass `amtool check-config`."""
    amtool = _tool("amtool")
    proc = subprocess.run([amtool, "check-config", str(ALERTS / "alertmanager.yaml")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "api_url_file" in (ALERTS / "alertmanager.yaml").read_text()
    assert "hooks.slack.com" not in (ALERTS / "alertmanager.yaml").read_text()


def test_dashboards_are_current_grafana_json() -> None:
    """Datasource as a variable, namespace/pool/model variables, no deprecated `graph` panels, and
    every metric a panel uses is produced by the exporter or the recording rules."""
    produced = set(re.findall(r'"(gpucost_[a-z_]+)"', "".join(
        p.read_text() for p in (REPO / "exporter").rglob("*.py"))))
    produced |= {n + "_total" for n in produced}
    recorded = set(re.findall(r"record: ([\w:]+)", (ALERTS / "gpu-cost-exporter.rules.yaml").read_text()))
    for path in (REPO / "dashboards").glob("*.json"):
        d = json.loads(path.read_text())
        names = [v["name"] for v in d["templating"]["list"]]
        assert names[:4] == ["datasource", "namespace", "pool", "gpu_model"], path.name
        for panel in d["panels"]:
            assert panel["type"] != "graph" and panel["datasource"]["uid"] == "${datasource}"
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            for t in panel["targets"]:
                for metric in re.findall(r"\b(gpucost_[a-z_]+|namespace:gpucost_[\w:]+)", t["expr"]):
                    assert metric in produced or metric in recorded, (path.name, metric)
