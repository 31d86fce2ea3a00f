"""Exporter discovery: this node's running exporter pods by each install's labels, scraped at the pod IP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from exporter.agent.exporters.discovery import (
    DEFAULT_SELECTORS_SETTING,
    ExporterFinder,
    ExporterSelector,
    discover,
    exporters_in,
    parse_selectors,
)
from exporter.settings.agent import AgentSettings


def pod(name: str, *, node: str = "gpu-1", ip: str = "10.0.0.7", phase: str = "Running",
        ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "gpu-operator"}, "spec": {"nodeName": node},
            "status": {"phase": phase, "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_selectors_setting_form_and_its_default() -> None:
    assert parse_selectors("app=a,tier in (x,y)@9400; app.kubernetes.io/name=metrics-exporter@5000/https") == (
        ExporterSelector("app=a,tier in (x,y)", 9400), ExporterSelector("app.kubernetes.io/name=metrics-exporter",
                                                                        5000, "https"))
    assert AgentSettings.model_fields["exporter_selectors"].default == DEFAULT_SELECTORS_SETTING
    for bad in ("app=a", "app=a@0", "app=a@x", "@9400", "app=a@9400/ftp", ""):
        with pytest.raises(ValueError, match="exporter selector"):
            parse_selectors(bad)


def test_running_pods_on_this_node_with_an_ip_ready_first() -> None:
    pods = [pod("b", ready=False, ip="10.0.0.9"), pod("a"), pod("elsewhere", node="gpu-2"),
            pod("pending", phase="Pending"), pod("no-ip", ip=""), pod("v6", ip="fd00::7")]
    found = exporters_in(pods, ExporterSelector("app=x", 9400), node="gpu-1")
    assert [(d.pod, d.url) for d in found] == [("a", "http://10.0.0.7:9400/metrics"),
                                               ("v6", "http://[fd00::7]:9400/metrics"),
                                               ("b", "http://10.0.0.9:9400/metrics")]
    https = exporters_in([pod("amd")], ExporterSelector("app=amd", 5000, "https"), node="gpu-1")
    assert https[0].url == "https://10.0.0.7:5000/metrics"


def test_discover_asks_each_selector_and_an_unreadable_api_is_unknown() -> None:
    asked: list[str] = []

    async def list_pods(labels: str) -> list[dict[str, Any]] | None:
        asked.append(labels)
        return [pod("amd-exp")] if labels == "app=amd" else []

    sels = (ExporterSelector("app=dcgm", 9400), ExporterSelector("app=amd", 5000))
    found = asyncio.run(discover(list_pods, sels, node="gpu-1"))
    assert asked == ["app=dcgm", "app=amd"] and [d.pod for d in found or []] == ["amd-exp"]

    async def down(_labels: str) -> list[dict[str, Any]] | None:
        return None

    assert asyncio.run(discover(down, sels, node="gpu-1")) is None


def test_finder_looks_first_then_on_failure_or_when_due() -> None:
    f = ExporterFinder(refresh_ticks=40, retry_ticks=4)
    assert f.due(1, scrape_failed=False)
    assert f.looked(1, [])  # nothing found yet: retried every 4 ticks
    assert not f.due(4, scrape_failed=False) and f.due(5, scrape_failed=False)
    found = exporters_in([pod("a")], ExporterSelector("app=x", 9400), node="gpu-1")
    assert f.looked(5, found) and not f.looked(6, list(found))  # same URLs: unchanged
    assert not f.due(9, scrape_failed=False) and f.due(10, scrape_failed=True)  # a failed scrape: look again
    assert not f.due(45, scrape_failed=False) and f.due(46, scrape_failed=False)  # refreshed every 40 ticks
    assert not f.looked(46, None) and f.found == found  # the API unreadable: keep what was known
