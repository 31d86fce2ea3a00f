"""The status page as a team sees it, in a real headless browser (Debian's chromium) behind an authenticating
proxy: the proxy forwards the signed-in user's token, as oauth2-proxy does (docs/security.md), and the
aggregator (GPUCOST_AUTH=kubernetes, reviews by the simulated API server) shows that user's namespaces only.

Cluster: team-a and team-b share node n-h100 (pool train). alice may get costs in team-a only; ops everywhere.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import get, wait
from tests.sim_fixture import SimClusterFactory, SimHandle

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

SCENARIO = """
tick: 1s
duration: 2h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n-h100, model: "NVIDIA H100 80GB HBM3", gpus: 4, labels: {gpu.platform/pool: train}}]
namespaces: [{name: team-a, gpu_quota: 8}, {name: team-b}]
pods:
  - {name: idle-a, namespace: team-a, node: n-h100, gpus: 1, utilization: 0.0}
  - {name: busy-b, namespace: team-b, node: n-h100, gpus: 2, utilization: 0.9}
events: [{type: quota_rejection, namespace: team-b, at: 1s, requested: 4}]
users:
  - {name: alice, token: t-alice, namespaces: [team-a]}
  - {name: ops, token: t-ops, cluster: true}
"""


class _Proxy(http.server.ThreadingHTTPServer):
    """Forwards GETs to the aggregator with the signed-in user's bearer token, as an authenticating proxy."""

    upstream: str
    token: str


class _Forward(http.server.BaseHTTPRequestHandler):
    server: _Proxy

    def do_GET(self) -> None:
        req = urllib.request.Request(self.server.upstream + self.path,
                                     headers={"Authorization": f"Bearer {self.server.token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "text/html")
        except urllib.error.HTTPError as e:
            status, body, ctype = e.code, e.read(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(name="sim")
def _sim(sim_cluster: SimClusterFactory) -> Iterator[tuple[SimHandle, str]]:
    sim = sim_cluster(SCENARIO)
    c = sim.cluster
    try:
        c.spawn("agent", ["agent"], c.agent_env("n-h100", GPUCOST_TICK="1s"))
        env = {**c.aggregator_env(), "GPUCOST_TICK": "1s"}
        assert env["GPUCOST_AUTH"] == "kubernetes"
        c.spawn("aggregator", ["aggregator"], env)
        upstream = f"http://{env['GPUCOST_LISTEN']}"
        ops = {"Authorization": f"Bearer {(sim.workdir / 'users' / 'ops.token').read_text()}"}
        wait(lambda: b"<td>team-b</td>" in get(upstream + "/", ops)[1] and b"min</td>" in get(upstream + "/", ops)[1],
             timeout=40)
        yield sim, upstream
    finally:
        c.close()


def _page_as(user: str, *, sim: SimHandle, upstream: str, profile: Path) -> str:
    """The status page's DOM as chromium renders it through the proxy signed in as ``user``."""
    assert CHROMIUM is not None
    proxy = _Proxy(("127.0.0.1", 0), _Forward)
    proxy.upstream, proxy.token = upstream, (sim.workdir / "users" / f"{user}.token").read_text()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}/"
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                              capture_output=True, text=True, timeout=90, check=True).stdout
    finally:
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.slow
def test_a_team_sees_only_its_namespaces_in_chromium(sim: tuple[SimHandle, str], tmp_path: Path) -> None:
    """alice's page names team-a (its row, its idle pod, its share of pool train) and nothing of team-b: not
    its name, pod, or quota rejection; ops's page names both. Without the proxy's token: 401."""
    handle, upstream = sim
    alice = _page_as("alice", sim=handle, upstream=upstream, profile=tmp_path / "alice")
    assert "<title>GPU cost status</title>" in alice
    assert "<td>team-a</td>" in alice and "idle-a" in alice
    assert "<td>train</td><td>team-a</td>" in alice
    assert "team-b" not in alice and "busy-b" not in alice and "exceeded quota" not in alice
    ops = _page_as("ops", sim=handle, upstream=upstream, profile=tmp_path / "ops")
    assert "<td>team-a</td>" in ops and "<td>team-b</td>" in ops and "exceeded quota" in ops
    assert get(upstream + "/")[0] == 401
