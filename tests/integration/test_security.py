"""Access and lifecycle, with real processes: bearer-token /v1/usage, TLS on both daemons, secrets kept
out of logs, and an aggregator that keeps retrying an unreachable API server while saying so."""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import sqlite3
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from exporter.sim.runner import free_port
from tests.procs import Cluster, get, wait
from tests.sim_fixture import SimClusterFactory

SCENARIO = """
tick: 1s
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: p, namespace: team-a, node: n0, gpus: 1, utilization: 0.5}]
"""


@pytest.fixture(name="tmp")
def _tmp(tmp_path: Path) -> Path:
    return tmp_path


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


@pytest.mark.slow
@pytest.mark.timeout(180)  # 37 s measured on a loaded 2-core machine
def test_token_tls_and_no_secret_in_logs(sim_cluster: SimClusterFactory) -> None:
    sim = sim_cluster(SCENARIO)
    tmp = sim.workdir
    cert, key = _self_signed(tmp)
    token = secrets.token_urlsafe(24)
    token_file = tmp / "token"
    token_file.write_text(token + "\n")
    c = sim.cluster
    try:
        tls = {"GPUCOST_TLS_CERT_FILE": str(cert), "GPUCOST_TLS_KEY_FILE": str(key), "GPUCOST_LOG_LEVEL": "debug"}
        agent_env = c.agent_env("n0", GPUCOST_TICK="1s", GPUCOST_USAGE_TOKEN_FILE=str(token_file), **tls)
        c.spawn("agent", ["agent"], agent_env)
        agent_url = f"https://{agent_env['GPUCOST_LISTEN']}"
        agg_env = {**c.aggregator_env(), "GPUCOST_TICK": "1s", "GPUCOST_AGENTS": agent_url,
                   "GPUCOST_AGENT_TOKEN_FILE": str(token_file), "GPUCOST_AGENT_CA_FILE": str(cert), **tls}
        c.spawn("aggregator", ["aggregator"], agg_env)
        ctx = ssl.create_default_context(cafile=str(cert))
        wait(lambda: get(f"{agent_url}/healthz", context=ctx)[0] == 200)
        assert get(f"{agent_url}/v1/usage", context=ctx)[0] == 401
        assert get(f"{agent_url}/v1/usage", {"Authorization": "Bearer wrong"}, context=ctx)[0] == 401
        wait(lambda: get(f"{agent_url}/v1/usage", {"Authorization": f"Bearer {token}"}, context=ctx)[0] == 200)
        with pytest.raises(OSError):  # plain HTTP is not served
            get(f"http://{agent_env['GPUCOST_LISTEN']}/healthz")
        agg = f"https://{agg_env['GPUCOST_LISTEN']}"
        wait(lambda: b'gpucost_agent_up{node="n0"} 1.0' in get(f"{agg}/metrics", context=ctx)[1], timeout=30)
        wait(lambda: b'gpucost_allocated_gpus{namespace="team-a"} 1.0' in get(f"{agg}/metrics", context=ctx)[1])
        wait(lambda: b'gpucost_cost_total{namespace="team-a",currency="USD"}' in get(f"{agg}/metrics", context=ctx)[1])
        assert c.stop("aggregator") == 0
        assert c.stop("agent") == 0
        conn = sqlite3.connect(agg_env["GPUCOST_LEDGER"])
        assert conn.execute("SELECT SUM(allocated_s) FROM usage").fetchone()[0] > 0
        conn.close()
    finally:
        c.close()
    logs = "".join(p.read_text(errors="replace") for p in (tmp / "logs").glob("*.log"))
    assert '"level": "debug"' in logs or "agent_started" in logs
    assert token not in logs


@pytest.mark.slow
@pytest.mark.timeout(120)  # 23 s measured on a loaded 2-core machine
def test_unreachable_api_server_keeps_retrying_and_says_so(tmp: Path) -> None:
    """Started against an API server that is not there: stays up, /healthz 200, /readyz 503 naming the
    unsynced watch, logs the retries with backoff, and exits 0 on SIGTERM."""
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    listen = f"127.0.0.1:{free_port()}"
    c = Cluster(tmp)
    try:
        c.spawn("aggregator", ["aggregator"], {"GPUCOST_LISTEN": listen, "GPUCOST_LEDGER": str(tmp / "l.db"),
                                               "GPUCOST_KUBECONFIG": str(kubeconfig), "GPUCOST_TICK": "1s"})
        wait(lambda: get(f"http://{listen}/healthz")[0] == 200)
        time.sleep(3)
        status, body = get(f"http://{listen}/readyz")
        assert status == 503 and json.loads(body)["kube_synced"] is False
        assert c.procs["aggregator"].poll() is None
        assert c.stop("aggregator", signal.SIGTERM) == 0
    finally:
        c.close()
    log = (tmp / "logs" / "aggregator.log").read_text()
    assert log.count('"event": "watch_error"') >= 3 and '"retry_in"' in log
