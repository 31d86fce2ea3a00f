"""The dashboards' cluster variable: every query of every panel is scoped to it, its label name is chosen at
generation (and in the chart), and Prometheus itself, given two clusters' series, answers one cluster's."""

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

GENERATOR = REPO / "dashboards" / "generate.py"
FOLDERS = (REPO / "dashboards", REPO / "helm" / "gpu-cost-exporter" / "files" / "dashboards")
# Written here independently of the generator: any gpucost_ metric (plain or recorded) or DCGM one.
METRIC = re.compile(r"(?<![\w:])(?:[a-z_]+:)?gpucost_\w+(?::\w+)*|(?<![\w:])DCGM_FI_\w+")


def _dashboards(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def _exprs(d: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in d["panels"] for t in p["targets"]]


def _unscoped(expr: str, label: str) -> list[str]:
    """Selectors in ``expr`` that do not match ``label=~"$cluster"`` first, and joins not on ``label``."""
    bad = [m.group(0) for m in METRIC.finditer(expr)
           if not expr[m.end():].startswith(f'{{{label}=~"$cluster"')]
    bad += [expr[m.start():m.start() + 30] for m in re.finditer(r"\bon \(", expr)
            if not expr[m.end():].startswith(f"{label}, ")]
    return bad


def _check_scoped(dashboards: dict[str, dict[str, Any]], label: str) -> None:
    assert len(dashboards) == 6
    for name, d in dashboards.items():
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert variables["cluster"]["definition"] == f"label_values(gpucost_allocated_gpu_seconds_total, {label})"
        assert variables["cluster"]["allValue"] == ".*" and variables["cluster"]["multi"] is True
        for var in ("namespace", "pool", "gpu_model"):  # chained: a cluster's namespaces, pools and models
            assert f'{{{label}=~"$cluster"}}' in variables[var]["definition"], (name, var)
            assert variables[var]["query"]["query"] == variables[var]["definition"]
        exprs = _exprs(d)
        assert exprs, name
        for expr in exprs:
            assert METRIC.search(expr), (name, expr)
            assert _unscoped(expr, label) == [], (name, expr)


def test_every_panel_query_matches_the_cluster_variable() -> None:
    """Both committed copies (dashboards/ and the chart's): every selector of every panel query starts with
    cluster=~"$cluster" and every join matches on cluster too (so "All" never pairs two clusters' rows)."""
    for folder in FOLDERS:
        _check_scoped(_dashboards(folder), "cluster")
    names = [v["name"] for v in _dashboards(FOLDERS[0])["gpu-cost-overview.json"]["templating"]["list"]]
    assert names == ["datasource", "cluster", "namespace", "pool", "gpu_model"]


def _generate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True, text=True, check=False,
                          cwd=tmp_path)


def test_a_cluster_id_variant_is_generated(tmp_path: Path) -> None:
    """``--cluster-label cluster_id --out DIR``: the same dashboards keyed by cluster_id, and nothing else
    differs from the committed ones."""
    proc = _generate(tmp_path, "--cluster-label", "cluster_id", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    variant = _dashboards(tmp_path / "out")
    _check_scoped(variant, "cluster_id")
    committed = _dashboards(FOLDERS[0])
    assert variant.keys() == committed.keys()
    for name, d in variant.items():
        text = json.dumps(d)
        assert 'cluster=~' not in text and "on (cluster," not in text, name
        back = (text.replace('cluster_id=~', 'cluster=~').replace("on (cluster_id, ", "on (cluster, ")
                .replace("_total, cluster_id)", "_total, cluster)"))
        assert json.loads(back) == committed[name], name


@pytest.mark.parametrize(("args", "message"), [
    (["--cluster-label", "cluster-id", "--out", "x"], "--cluster-label: 'cluster-id' is not a Prometheus label"),
    (["--cluster-label", "cluster_id"], "--cluster-label: the committed dashboards use 'cluster'"),
])
def test_a_bad_cluster_label_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _generate(tmp_path, *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def _chart_dashboards(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from tests.unit.repo.helm_render import render

    cms = [cm for cm in render(values).of_kind("ConfigMap") if cm["metadata"]["labels"].get("grafana_dashboard")]
    return {name: json.loads(text) for cm in cms for name, text in cm["data"].items()}


def test_chart_renders_the_dashboards_with_its_cluster_label(tmp_path: Path) -> None:
    """monitoring.dashboards.clusterLabel: the ConfigMaps hold exactly what the generator writes for that
    label; by default the committed files as they are."""
    assert _chart_dashboards({}) == _dashboards(FOLDERS[1])
    assert _generate(tmp_path, "--cluster-label", "cluster_id", "--out", str(tmp_path)).returncode == 0
    rendered = _chart_dashboards({"monitoring": {"dashboards": {"clusterLabel": "cluster_id"}}})
    assert rendered == _dashboards(tmp_path)


def _target(dashboard: str, title: str, cluster: str) -> str:
    """A panel's query with the cluster variable set to ``cluster`` (a value, or Grafana's regex of several)
    and every other variable to "All"."""
    d = json.loads((REPO / "dashboards" / f"{dashboard}.json").read_text())
    panel = next(p for p in d["panels"] if p["title"] == title)
    expr: str = panel["targets"][0]["expr"]
    for var in ("namespace", "pool", "gpu_model"):
        expr = expr.replace(f"${var}", ".*")
    return expr.replace("$cluster", cluster)


SAVINGS = "gpucost_recommendation_monthly_savings"
TWO_CLUSTERS = [  # one Thanos/Mimir: each cluster's series carry its external label; both have namespace "ai"
    (f'{SAVINGS}{{cluster="east",namespace="lab",workload="nb",action="scale_to_zero"}}', 2920.0),  # 730 h x 4.00
    (f'{SAVINGS}{{cluster="west",namespace="lab",workload="nb",action="scale_to_zero"}}', 1460.0),  # 730 h x 2.00
    ('gpucost_budget{cluster="east",namespace="ai"}', 10000.0),
    ('gpucost_forecast_month_cost{cluster="east",namespace="ai"}', 12500.0),  # over
    ('gpucost_budget{cluster="west",namespace="ai"}', 10000.0),
    ('gpucost_forecast_month_cost{cluster="west",namespace="ai"}', 8000.0),  # within
    ('gpucost_budget{cluster="west",namespace="ml"}', 1000.0),
    ('gpucost_forecast_month_cost{cluster="west",namespace="ml"}', 1500.0),  # over
]
NO_LABEL = [  # one Prometheus queried directly: no external label on its own series
    (f'{SAVINGS}{{namespace="lab",workload="nb",action="scale_to_zero"}}', 730.0),
    ('gpucost_budget{namespace="ai"}', 100.0),
    ('gpucost_forecast_month_cost{namespace="ai"}', 150.0),
]


def _sample(labels: str, value: float) -> dict[str, Any]:
    return {"labels": labels, "value": value}


def test_prometheus_selects_only_the_chosen_clusters_series(tmp_path: Path) -> None:
    """Evaluated by `promtool test rules` on two clusters' series. east: savings 2920, one namespace over
    budget (ai: 12,500 > 10,000), its forecast 1.25 of the budget. west: 1460, one over (ml: 1,500 > 1,000;
    ai 8,000 is within). All (.*) or both picked ((east|west)): 2920 + 1460 = 4380 and 2 over: the join
    pairs each cluster's ai with its own budget (on namespace alone it would match two budgets and fail).
    Without the label at all, .* still matches: 730 and 1 over (150 > 100)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian's prometheus package)")
    dash, savings, over = "gpu-savings-budgets", "Monthly savings on offer", "Namespaces forecast over budget"
    share = "Month-end forecast as a share of the budget"
    fleet = [
        (_target(dash, savings, "east"), [_sample("{}", 2920.0)]),
        (_target(dash, over, "east"), [_sample("{}", 1)]),
        (_target(dash, share, "east"), [_sample('{cluster="east",namespace="ai"}', 12500.0 / 10000.0)]),
        (_target(dash, savings, "west"), [_sample("{}", 1460.0)]),
        (_target(dash, over, "west"), [_sample("{}", 1)]),
        (_target(dash, savings, ".*"), [_sample("{}", 2920.0 + 1460.0)]),
        (_target(dash, over, ".*"), [_sample("{}", 2)]),
        (_target(dash, over, "(east|west)"), [_sample("{}", 2)]),
        (_target(dash, savings, "north"), [_sample("{}", 0.0)]),  # a cluster with nothing on offer: 0
    ]
    alone = [(_target(dash, savings, ".*"), [_sample("{}", 730.0)]), (_target(dash, over, ".*"), [_sample("{}", 1)])]
    (tmp_path / "none.rules.yaml").write_text("groups: []\n")

    def group(series: list[tuple[str, float]], tests: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
        return {"interval": "1m", "input_series": [{"series": s, "values": f"{v}x5"} for s, v in series],
                "promql_expr_test": [{"expr": e, "eval_time": "2m", "exp_samples": x} for e, x in tests]}

    spec = {"rule_files": ["none.rules.yaml"], "evaluation_interval": "1m",
            "tests": [group(TWO_CLUSTERS, fleet), group(NO_LABEL, alone)]}
    (tmp_path / "cluster_test.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run([promtool, "test", "rules", "cluster_test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
