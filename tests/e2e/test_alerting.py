"""End to end with real Prometheus and Alertmanager (Debian's packages): a squatting idle pod in the
simulated cluster reaches a Slack stand-in as a GPUAllocatedButIdle message naming its namespace and
pod, then as a resolved message once the pod is deleted. In the same run every dashboard panel's
expression returns data from Prometheus, and both KEDA paths return exactly one value."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from exporter.sim.runner import free_port
from tests.conftest import REPO
from tests.e2e.alert_stack import ALERTMANAGER, NEEDS_BINARIES, SlackStandIn, alertmanager_config, render_rules
from tests.procs import get, wait
from tests.sim_fixture import SimClusterFactory

pytestmark = [pytest.mark.e2e, NEEDS_BINARIES]
ARTIFACTS = REPO / "test-artifacts"

SCENARIO = """
tick: 1s
duration: 2h
prices: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.5}
nodes:
  - {name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 2, labels: {gpu.platform/pool: train}}
  - {name: n-a100, model: "NVIDIA A100-SXM4-80GB", gpus: 2, mig: {0: [3g.40gb, 3g.40gb]},
     labels: {gpu.platform/pool: infer}}
namespaces:
  - {name: team-a, labels: {gpu.platform/team: research}, gpu_quota: 4}
  - {name: team-b, labels: {gpu.platform/team: serving}}
pods:
  - {name: notebook-0, namespace: team-a, node: n-h100, gpus: 1, utilization: 0.01, end: 45s,
     owner: {kind: StatefulSet, name: notebook}}
  - {name: train-0, namespace: team-a, node: n-h100, gpus: 1, utilization: 0.9, owner: {kind: Job, name: train}}
  - {name: serve-0, namespace: team-b, node: n-a100, gpus: 1, resource: nvidia.com/mig-3g.40gb, utilization: 0.5,
     owner: {kind: Deployment, name: serve}}
  - {name: big-0, namespace: team-a, gpus: 4, pending_reason: Insufficient nvidia.com/gpu}
queues:
  - {kind: kueue, name: cq-serving, gpus: 4, namespaces: [team-b]}
  - {kind: volcano, name: research, gpus: 8, namespaces: [team-a]}
events:
  - {type: quota_rejection, namespace: team-a, at: 1s, requested: 2}
"""

# Test-only thresholds: the same rule template, with durations shortened to seconds.
FAST = {"evaluationInterval": "1s", "idleForSeconds": 3, "idleCostBurnPerHour": 0.001, "idleCostBurnWindow": "30s",
        "idleCostBurnFor": "1s", "quotaFor": "1s", "pendingFor": "1s", "agentDownFor": "1s", "dcgmDownFor": "1s",
        "ledgerStaleFor": "1s"}


def _prom_query(prom: str, expr: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": expr})
    status, body = get(f"http://{prom}/api/v1/query?{q}")
    data = json.loads(body)
    assert status == 200 and data["status"] == "success", (expr, data)
    return list(data["data"]["result"])


def _dashboard_exprs() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted((REPO / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for t in panel["targets"]:
                expr = (t["expr"].replace("$__rate_interval", "1m").replace("$__range", "1h")
                        .replace("$namespace", ".*").replace("$pool", ".*").replace("$gpu_model", ".*")
                        .replace("$cluster", ".*"))  # no external label here: ".*" matches its absence
                out.append((path.name, panel["title"], expr))
    return out


@pytest.fixture(name="stack")
def _stack(sim_cluster: SimClusterFactory) -> Iterator[dict[str, Any]]:
    sim = sim_cluster(SCENARIO)
    tmp, c = sim.workdir, sim.cluster
    slack = SlackStandIn()
    try:
        agents = {}
        for n in ("n-h100", "n-a100"):
            env = c.agent_env(n, GPUCOST_TICK="1s")
            agents[n] = env["GPUCOST_LISTEN"]
            c.spawn(f"agent-{n}", ["agent"], env)
        # a budget, so the "Savings & budgets" dashboard's budget and forecast panels have a namespace to show
        agg_env = {**c.aggregator_env(), "GPUCOST_TICK": "1s", "GPUCOST_BUDGETS": "team-a=100"}
        c.spawn("aggregator", ["aggregator"], agg_env)
        dcgm = []
        for line in (c.logs / "sim.log").read_text().splitlines():
            if " DCGM http://" in line:
                dcgm.append(line.split("DCGM http://")[1].split("/metrics")[0])
        am_port, prom_port = free_port(), free_port()
        rules = render_rules(tmp, FAST)
        subprocess.run(["promtool", "check", "rules", str(rules)], check=True, capture_output=True)
        am_cfg = alertmanager_config(tmp, slack.url)
        subprocess.run(["amtool", "check-config", str(am_cfg)], check=True, capture_output=True)
        prom_cfg = tmp / "prometheus.yml"
        prom_cfg.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [
                {"job_name": "gpu-cost-aggregator", "static_configs": [{"targets": [agg_env["GPUCOST_LISTEN"]]}]},
                {"job_name": "gpu-cost-agent", "static_configs": [{"targets": list(agents.values())}]},
                {"job_name": "dcgm-exporter", "honor_labels": True, "static_configs": [{"targets": dcgm}]},
            ]}))
        am = subprocess.Popen([str(ALERTMANAGER), f"--config.file={am_cfg}", f"--storage.path={tmp / 'am'}",
                               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
                              stdout=(c.logs / "am.log").open("wb"), stderr=subprocess.STDOUT)
        prom = subprocess.Popen(["prometheus", f"--config.file={prom_cfg}", f"--storage.tsdb.path={tmp / 'prom'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}", "--rules.alert.resend-delay=1s"],
                                stdout=(c.logs / "prom.log").open("wb"), stderr=subprocess.STDOUT)
        yield {"prom": f"127.0.0.1:{prom_port}", "slack": slack, "aggregator": agg_env["GPUCOST_LISTEN"],
               "tmp": tmp, "cluster": c}
    finally:
        for p in ("am", "prom"):
            proc = locals().get(p)
            if isinstance(proc, subprocess.Popen):
                proc.terminate()
                proc.wait(timeout=20)
        c.close()
        slack.server.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(180)  # 53 s measured on a loaded 2-core machine
def test_idle_pod_alert_reaches_slack_then_resolves(stack: dict[str, Any]) -> None:
    slack: SlackStandIn = stack["slack"]
    prom = stack["prom"]
    wait(lambda: slack.find("FIRING", "notebook-0") is not None, timeout=45)
    firing = slack.find("FIRING", "notebook-0")
    assert firing is not None
    att = firing["attachments"][0]
    assert firing["channel"] == "#gpu-research"  # routed by the namespace's team label
    assert "team-a/notebook-0" in att["text"] and "GPUAllocatedButIdle" in att["title"]
    assert "GPUs: 1.00 \u00d7 NVIDIA H100 80GB HBM3" in att["text"] and "wasting *4.00 USD/h*" in att["text"]
    assert "train-0" not in att["text"]  # the busy pod is not idle

    # While the idle pod still exists: every dashboard panel's expression returns data.
    time.sleep(3)
    # Right-sizing needs 24 h of evidence by default, far more than this run: its panels must parse and run
    # here, and their numbers are checked by promtool in test_alerts_dashboards.py::
    # test_savings_and_budgets_dashboard_computes_by_hand.
    empty = [(d, t, e) for d, t, e in _dashboard_exprs() if not _prom_query(prom, e)]
    # CO2e is reported only under a pricing file's ``emissions:`` section, which this stack's has none of (its
    # numbers are checked in tests/integration/test_emissions_golden.py).
    assert [(d, t, e) for d, t, e in empty
            if "gpucost_recommendation_monthly_savings" not in e and "gpucost_co2e_grams_total" not in e] == [], empty

    # KEDA: the Prometheus trigger's query and the metrics-api endpoint each return exactly one value.
    so = yaml.safe_load((REPO / "docs" / "keda" / "scaledobject-prometheus.yaml").read_text())
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    query = query.replace('namespace="ai-inference",workload="llm-serve"', 'namespace="team-b",workload="serve"')
    result = _prom_query(prom, query)
    assert len(result) == 1 and float(result[0]["value"][1]) == pytest.approx(0.5)
    status, body = get(f"http://{stack['aggregator']}/api/v1/keda/utilization?namespace=team-b&workload=serve")
    assert status == 200 and list(json.loads(body)) == ["value"]
    assert json.loads(body)["value"] == pytest.approx(0.5)

    # The pod ends at 45 s: the alert resolves and Slack hears about it.
    wait(lambda: slack.find("RESOLVED", "notebook-0") is not None, timeout=60)
    resolved = slack.find("RESOLVED", "notebook-0")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "slack-payloads.json").write_text(json.dumps({"firing": firing, "resolved": resolved}, indent=2))
