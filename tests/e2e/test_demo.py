"""`gpu-cost-exporter demo` as a user runs it: the aggregator serves every contract series on its
listen address, `promtool check metrics` accepts the scrape, and the cost table is printed; recommendations and
budgets' forecasts appear within its first minutes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exporter.sim.runner import free_port
from tests.procs import get, wait

CONTRACT = ("gpucost_allocated_gpu_seconds_total", "gpucost_used_gpu_seconds_total",
            "gpucost_unmeasured_gpu_seconds_total", "gpucost_cost_total", "gpucost_idle_cost_total",
            "gpucost_unallocated_gpu_seconds_total", "gpucost_allocated_gpus", "gpucost_gpu_utilization_ratio",
            "gpucost_workload_gpu_utilization_ratio", "gpucost_pod_idle_seconds", "gpucost_gpu_hourly_price",
            "gpucost_quota_gpus", "gpucost_pending_gpu_pods", "gpucost_agent_up", "gpucost_dcgm_up",
            "gpucost_quota_rejections_total")


@pytest.mark.slow
@pytest.mark.timeout(300)  # 89 s measured on a loaded 2-core machine
def test_demo_serves_the_contract(tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    log = (tmp_path / "demo.out").open("w")  # a file, not a pipe: minutes of tables would fill a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "demo", "--listen", listen, "--duration", "150s",
                             "--refresh", "2s"], stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        wait(lambda: get(f"http://{listen}/readyz")[0] == 200, timeout=30)
        wait(lambda: all(f"\n{s}{{" in get(f"http://{listen}/metrics")[1].decode() for s in CONTRACT[:7]), timeout=30)
        time.sleep(3)
        body = get(f"http://{listen}/metrics")[1]
        text = body.decode()
        missing = [s for s in CONTRACT if f"\n{s}{{" not in text]
        # Pending pods, the rejection and the idle pod arrive at 1 minute into the demo scenario.
        assert set(missing) <= {"gpucost_pending_gpu_pods", "gpucost_quota_rejections_total"}, missing
        assert re.search(r'gpucost_allocated_gpus\{namespace="ai-training"\} 5\.0', text)
        assert 'gpucost_quota_gpus{namespace="ai-inference",type="hard",source="resourcequota"} 4.0' in text
        promtool = shutil.which("promtool")
        if promtool is not None:
            check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, check=False)
            assert check.returncode == 0, check.stdout + check.stderr
        # Right-sizing from the demo's short evidence settings (1 minute): the idle notebook first of all.
        wait(lambda: 'workload="notebook-alice",action="scale_to_zero"' in get(f"http://{listen}/metrics")[1].decode(),
             timeout=120)
        time.sleep(5)  # the demo prints the new rows after its next tick
        assert "notebook-alice" in get(f"http://{listen}/api/v1/recommendations")[1].decode()
        budgets = get(f"http://{listen}/api/v1/report?view=budgets")[1].decode()
        assert '"ai-training"' in budgets and '"ai-dev"' in budgets, budgets
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    out = (tmp_path / "demo.out").read_text()
    assert "gpu-cost-exporter demo: simulated cluster 'default.yaml' with 7 GPU nodes" in out
    assert re.search(r"^ai-training\s+\d", out, re.M) and "__unallocated__" in out
    assert "--- budgets: month-end forecast ---" in out
    assert re.search(r"^ai-training\s+2\d{3}-\d\d\s+500\.00", out, re.M)
    assert re.search(r"^ai-training\s+notebook-alice\s+scale_to_zero", out, re.M), out[-3000:]
    assert proc.returncode == 0
