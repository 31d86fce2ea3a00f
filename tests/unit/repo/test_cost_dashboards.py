"""The cost overview's list-versus-effective panels, evaluated by `promtool test rules` on known counters
(every variable "All", Grafana's ``$__range`` = 1h and ``$__rate_interval`` = 5m), against values by hand.
promtool compares floats exactly and extrapolated increases carry rounding noise (55.03999999999962), so
each query is evaluated rounded to 1e-4, finer than the panels show money."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

DASHBOARD = REPO / "dashboards" / "gpu-cost-overview.json"
STEP = 36  # seconds between samples: 1/100 of an hour, so each step adds a hundredth of the hourly amount
# Hourly amounts, as the aggregator's counters grow (list = GPU-hours x L, cost = effective, rule 7):
#   research: 8 spot H100s on p5.48xlarge, list 8 x 6.88 = 55.04, cost 55.04 x 0.35 = 19.264
#   training: 4 H100s at list, 4 x 4.00 = 16.00 both
#   lab: 4 owned A100s, list = capital 4 x 0.50 = 2.00, cost 2.00 + energy 4 x 0.09 = 2.36 (kWh x price x PUE)
HOURLY = {"research": (55.04, 19.264), "training": (16.00, 16.00), "lab": (2.00, 2.36)}


def _expr(title: str, ref: str = "A") -> str:
    d = json.loads(DASHBOARD.read_text())
    panel = next(p for p in d["panels"] if p["title"] == title)
    expr: str = next(t["expr"] for t in panel["targets"] if t["refId"] == ref)
    for var, value in (("$cluster", ".*"), ("$namespace", ".*"), ("$pool", ".*"), ("$gpu_model", ".*"),
                       ("$__range", "1h"), ("$__rate_interval", "5m")):
        expr = expr.replace(var, value)
    return f"round({expr}, 0.0001)"


def _series() -> list[dict[str, str]]:
    """Counters starting at 100 (a counter that started long ago), growing by hourly / 100 every 36 s."""
    out = []
    for ns, (list_h, cost_h) in HOURLY.items():
        for name, hourly in (("gpucost_list_cost_total", list_h), ("gpucost_cost_total", cost_h)):
            out.append({"series": f'{name}{{namespace="{ns}",currency="USD"}}', "values": f"100+{hourly / 100}x200"})
    return out


def _sample(labels: str, value: float) -> dict[str, Any]:
    return {"labels": labels, "value": value}


def test_list_vs_effective_and_saved_panels_compute_by_hand(tmp_path: Path) -> None:
    """Over the last hour: research list 55.04, effective 19.264, saved (55.04 - 19.264) = 35.776 per hour;
    training pays list: saved 0; lab's owned GPUs cost their energy beyond list: saved 2.00 - 2.36 = -0.36."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian's prometheus package)")
    cases = [
        (_expr("List vs effective cost per namespace in range"),
         [_sample(f'{{namespace="{ns}"}}', list_h) for ns, (list_h, _c) in HOURLY.items()]),
        (_expr("List vs effective cost per namespace in range", "B"),
         [_sample(f'{{namespace="{ns}"}}', cost_h) for ns, (_l, cost_h) in HOURLY.items()]),
        (_expr("Saved by commitments and spot (per hour)"), [
            _sample('{namespace="research",currency="USD"}', round(55.04 - 19.264, 4)),  # 35.776
            _sample('{namespace="training",currency="USD"}', 16.00 - 16.00),  # 0
            _sample('{namespace="lab",currency="USD"}', round(2.00 - 2.36, 4))]),  # -0.36
    ]
    (tmp_path / "none.rules.yaml").write_text("groups: []\n")
    spec = {"rule_files": ["none.rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": f"{STEP}s", "input_series": _series(),
        "promql_expr_test": [{"expr": e, "eval_time": "90m", "exp_samples": x} for e, x in cases]}]}
    (tmp_path / "dash_test.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run([promtool, "test", "rules", "dash_test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
