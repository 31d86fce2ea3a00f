"""The status page in a real headless browser (Debian's chromium): it renders the namespaces and
figures, shows a pod named with HTML/JS characters as text, and a screenshot is saved."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.procs import get, wait
from tests.sim_fixture import SimClusterFactory

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")]
EVIL = "evil-<script>document.title='pwned'</script>"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

SCENARIO = f"""
tick: 1s
duration: 2h
prices: {{"NVIDIA H100 80GB HBM3": 4.0}}
nodes: [{{name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 4, labels: {{gpu.platform/pool: train}}}}]
namespaces: [{{name: team-a, gpu_quota: 8}}, {{name: team-b}}]
pods:
  - {{name: "{EVIL}", namespace: team-a, node: n-h100, gpus: 1, utilization: 0.0}}
  - {{name: busy-0, namespace: team-b, node: n-h100, gpus: 2, utilization: 0.9}}
  - {{name: big-0, namespace: team-a, gpus: 8, pending_reason: Insufficient nvidia.com/gpu}}
events: [{{type: quota_rejection, namespace: team-a, at: 1s, requested: 4}}]
"""


@pytest.fixture(name="aggregator_url")
def _aggregator_url(sim_cluster: SimClusterFactory) -> Iterator[str]:
    sim = sim_cluster(SCENARIO)
    c = sim.cluster
    try:
        c.spawn("agent", ["agent"], c.agent_env("n-h100", GPUCOST_TICK="1s"))
        env = {**c.aggregator_env(), "GPUCOST_TICK": "1s"}
        c.spawn("aggregator", ["aggregator"], env)
        url = f"http://{env['GPUCOST_LISTEN']}/"
        wait(lambda: b"Top idle pods" in get(url)[1] and b"evil-" in get(url)[1] and b"min</td>" in get(url)[1],
             timeout=40)
        yield url
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.timeout(180)  # 42 s measured (33 s of it starting the aggregator) on a loaded machine
def test_status_page_in_chromium(aggregator_url: str, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", aggregator_url],
                         capture_output=True, text=True, timeout=90, check=True).stdout
    assert "<title>GPU cost status</title>" in dom  # the injected script did not run (title unchanged)
    assert "<td>team-a</td>" in dom and "<td>team-b</td>" in dom
    assert "evil-&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert "<script" not in dom
    assert "big-0 <span class=\"tag\">insufficient_gpu</span>" in dom
    assert "exceeded quota" in dom
    assert "4.0000 USD/h" in dom  # the idle pod's GPU wastes 4.00 per hour
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "status-page.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                    "--window-size=1280,1100", aggregator_url], capture_output=True, timeout=90, check=True)
    assert shot.stat().st_size > 10_000
