"""The device-health dashboard has a vendor dimension: the per-device legend names it and one panel averages
utilisation by vendor and model, from the agent's `vendor` label."""

from __future__ import annotations

import json

from tests.conftest import REPO


def test_device_health_dashboard_has_a_vendor_dimension() -> None:
    for copy in (REPO / "dashboards", REPO / "helm" / "gpu-cost-exporter" / "files" / "dashboards"):
        board = json.loads((copy / "gpu-device-health.json").read_text())
        exprs = {t["expr"]: t["legendFormat"] for p in board["panels"] for t in p.get("targets", [])}
        assert any(e.startswith("avg by (vendor, gpu_model) (gpucost_device_utilization_ratio") for e in exprs)
        assert any("{{vendor}}" in legend and "gpu_uuid" in legend for legend in exprs.values())
