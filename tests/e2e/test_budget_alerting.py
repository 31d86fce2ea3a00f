"""A budget that holds its queue, end to end to Slack: the whole product on the simulator in virtual time (agents,
aggregator, the simulated API over HTTP), real Prometheus (Debian's package) scraping the aggregator with the chart's
rules, real Alertmanager with the example config's Slack receiver pointed at a loopback stand-in.

From Sunday 2027-01-03 22:00 UTC (the calendar week rolls over at minute 120), ticks of 60 s: Kueue LocalQueue
team-a/train, weekly budget 4 GPU-hours, ``action: hold``; train-0 and train-1 hold 2 H100 each, so 4 GPUs x 1 h =
4 GPU-h are spent at minute 60. Within that tick the LocalQueue's stopPolicy is Hold and an Event says why; the
scenario then waits (virtual time stands still, the aggregator keeps serving) until Slack hears GPUBudgetQueueHeld and
GPUBudgetThresholdReached naming the budget and the queue, with the spent fraction and the runbook. At the next week
the hold is released and Slack hears the alert resolve.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.runner import free_port
from exporter.sim.scenario import parse_scenario
from tests.conftest import REPO
from tests.e2e.alert_stack import ALERTMANAGER, NEEDS_BINARIES, SlackStandIn, alertmanager_config, render_rules

pytestmark = [pytest.mark.e2e, NEEDS_BINARIES]

START = 1_799_013_600.0  # Sunday 2027-01-03 22:00:00 UTC: the week rolls over 2 h later
SCENARIO = """
tick: 60s
duration: 125m
prices: {"NVIDIA H100 80GB HBM3": 4.00}
nodes: [{name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 8}]
namespaces: [{name: team-a}]
queues: [{kind: kueue, name: gpu, gpus: 8, local_queues: [{namespace: team-a, name: train}]}]
pods:
  - {name: train-0, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 125m}
  - {name: train-1, namespace: team-a, node: n-h100, gpus: 2, queue: train, end: 125m}
budgets:
  - {name: train-weekly, target: {kueue_local_queue: team-a/train}, gpu_hours: 4, window: week, action: hold}
"""
ARTIFACTS = REPO / "test-artifacts"
RUNBOOKS = "https://gpu-cost-exporter.github.io/gpu-cost-exporter/runbooks"


async def _until(found: Callable[[], dict[str, Any] | None], *, timeout: float) -> dict[str, Any]:
    """Poll without blocking the loop (the aggregator serves Prometheus's scrapes from it meanwhile)."""
    deadline = time.monotonic() + timeout
    while (got := found()) is None:
        assert time.monotonic() < deadline, "no such Slack post in time"
        await asyncio.sleep(0.2)
    return got


def _prometheus_config(tmp: Path, *, rules: Path, aggregator: str, am_port: int) -> Path:
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(rules)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [{"job_name": "gpu-cost-aggregator", "static_configs": [{"targets": [aggregator]}]}]}))
    return path


def _lq(pipe: Pipeline) -> dict[str, Any]:
    obj: dict[str, Any] = pipe.peers.cluster.store.objects["localqueues"][("team-a", "train")]
    return obj


@pytest.fixture(name="alerting")
def _alerting(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The Slack stand-in, Alertmanager and Prometheus, the latter scraping the aggregator's address (the aggregator
    itself starts in the test, on the test's loop)."""
    slack = SlackStandIn()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        aggregator, am_port, prom_port = f"127.0.0.1:{free_port()}", free_port(), free_port()
        rules = render_rules(tmp_path, {"evaluationInterval": "1s"})
        subprocess.run(["promtool", "check", "rules", str(rules)], check=True, capture_output=True)
        am_cfg = alertmanager_config(tmp_path, slack.url)
        subprocess.run(["amtool", "check-config", str(am_cfg)], check=True, capture_output=True)
        prom_cfg = _prometheus_config(tmp_path, rules=rules, aggregator=aggregator, am_port=am_port)
        procs.append(subprocess.Popen(
            [str(ALERTMANAGER), f"--config.file={am_cfg}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
            stdout=(tmp_path / "am.log").open("wb"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={prom_cfg}", f"--storage.tsdb.path={tmp_path / 'prom'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--rules.alert.resend-delay=1s"],
            stdout=(tmp_path / "prom.log").open("wb"), stderr=subprocess.STDOUT))
        yield {"slack": slack, "aggregator": aggregator, "work": tmp_path / "w"}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)
        slack.server.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(120)  # 20-30 s measured on a loaded 2-core machine
async def test_budget_hold_reaches_slack_with_why_and_runbook_then_resolves(alerting: dict[str, Any]) -> None:
    slack: SlackStandIn = alerting["slack"]
    pipe = Pipeline(parse_scenario(SCENARIO, "budget-alerts.yaml"), alerting["work"], clock=VirtualClock(START),
                    aggregator_listen=alerting["aggregator"])
    try:
        await pipe.start()
        for minute in range(0, 61):
            await pipe.step(minute * 60.0)
            if minute == 59:  # 4 GPUs x 59/60 h = 3.933 GPU-h of 4: not yet
                assert _lq(pipe)["spec"]["stopPolicy"] == "None"
        # minute 60: 4 GPUs x 1 h = 4 GPU-h of 4, held within this tick; the Event on the LocalQueue says why
        assert _lq(pipe)["spec"]["stopPolicy"] == "Hold"
        events = [e["message"] for e in pipe.peers.cluster.store.objects["events"].values()
                  if e["involvedObject"].get("name") == "train" and e["reason"] == "BudgetSpent"]
        assert len(events) == 1 and "4.000000000 GPU-h / 4 GPU-h" in events[0]
        assert "Hold by budget train-weekly" in events[0]

        held = await _until(lambda: slack.find_alert("FIRING", "GPUBudgetQueueHeld", "team-a/train"), timeout=40)
        att = held["attachments"][0]
        assert held["channel"] == "#gpu-platform"
        assert att["title"] == "[FIRING:1] GPUBudgetQueueHeld: budget train-weekly"
        assert "*budget train-weekly* on `team-a/train`" in att["text"]
        assert ("Budget train-weekly (week) is spent (100% of its limit): kueue local queue team-a/train is held and "
                "admits no new work") in att["text"]
        assert "evicted" not in att["text"]  # hold, not drain: running workloads run on
        assert f"<{RUNBOOKS}/gpu-budget-queue-held/|Runbook>" in att["text"]

        spent = await _until(lambda: slack.find_alert("FIRING", "GPUBudgetThresholdReached",
                                                      "has reached 1 of its limit"), timeout=20)
        text = spent["attachments"][0]["text"]
        assert ("Budget train-weekly (week) on kueue local queue team-a/train has reached 1 of its limit: 100% spent"
                in text)
        assert f"<{RUNBOOKS}/gpu-budget-threshold-reached/|Runbook>" in text
        assert slack.find_alert("FIRING", "GPUBudgetQueueHeld", "resolved") is None

        # minute 120: a new week, 0 of 4 GPU-h spent: released, and Slack hears the alert resolve
        for minute in range(61, 121):
            await pipe.step(minute * 60.0)
        assert _lq(pipe)["spec"]["stopPolicy"] == "None"
        resolved = await _until(lambda: slack.find_alert("RESOLVED", "GPUBudgetQueueHeld", "team-a/train"),
                                timeout=40)
        assert ":white_check_mark: resolved: *budget train-weekly* on `team-a/train`" in resolved["attachments"][0][
            "text"]
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "slack-budget-payloads.json").write_text(json.dumps(
            {"held": held, "threshold": spent, "resolved": resolved}, indent=2))
    finally:
        await pipe.close()
