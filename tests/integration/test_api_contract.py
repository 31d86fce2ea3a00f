"""The HTTP API's contract, checked against live daemons: schemathesis generates requests from the OpenAPI
documents (valid and invalid query parameters, with and without a token) and checks every answer: never a
5xx, a status code, content type, headers and body the document lists.

Real processes on the simulator's peers: one agent (usage token on), an aggregator with authentication on (the
scenario's users, reviewed by the simulated API server) and one with it off. The aggregator's document is
read from its own ``/api/v1/openapi.json``; the agent's (it serves none) from ``exporter.agent.api_spec``.
Bounded: a fixed number of examples per route and a fixed seed (about a minute on two cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter.agent.api_spec import openapi as agent_openapi
from exporter.sim.runner import free_port
from tests.procs import get, wait
from tests.sim_fixture import SimHandle, running_sim_cluster

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 1.0}
nodes: [{name: n0, model: "NVIDIA L4", gpus: 2}]
namespaces: [{name: team-a, monthly_budget: 100}]
pods: [{name: p, namespace: team-a, node: n0, gpus: 1, utilization: 0.5}]
users:
  - {name: ops, token: t-ops, cluster: true}
  - {name: alice, token: t-alice, namespaces: [team-a]}
"""
MAX_EXAMPLES = 25
SEED = 41
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance")


@dataclass(frozen=True)
class Live:
    sim: SimHandle
    agent: str  # base URL
    agent_token: str
    secured: str  # aggregator with auth=kubernetes
    open: str  # aggregator with auth=none


def _ready(url: str) -> bool:
    return get(f"{url}/readyz")[0] == 200


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running_sim_cluster(tmp_path_factory.mktemp("contract"), SCENARIO) as sim:
        agent_env = sim.agent_env("n0")
        sim.cluster.spawn("agent", ["agent"], env=agent_env)
        secured_env = sim.aggregator_env()
        assert secured_env.get("GPUCOST_AUTH") == "kubernetes"
        sim.cluster.spawn("agg-secured", ["aggregator"], env=secured_env)
        open_listen = f"127.0.0.1:{free_port()}"
        sim.cluster.spawn("agg-open", ["aggregator"], env={
            **secured_env, "GPUCOST_AUTH": "none", "GPUCOST_LISTEN": open_listen,
            "GPUCOST_LEDGER": str(sim.workdir / "open-ledger.db")})
        urls = [f"http://{agent_env['GPUCOST_LISTEN']}", f"http://{secured_env['GPUCOST_LISTEN']}",
                f"http://{open_listen}"]
        for name, url in zip(("agent", "agg-secured", "agg-open"), urls, strict=True):
            wait(lambda u=url, n=name: _ready(u) or not sim.cluster.running(n), timeout=60)
            assert _ready(url), sim.cluster.tail(name)
        yield Live(sim, urls[0], Path(agent_env["GPUCOST_USAGE_TOKEN_FILE"]).read_text().strip(), urls[1], urls[2])


def _schemathesis(location: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "", "NO_COLOR": "1"}
    return subprocess.run([str(Path(sys.executable).with_name("schemathesis")), "run", location, "--checks", CHECKS,
                           "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED), "--workers", "1",
                           "--phases", "examples,coverage,fuzzing", "--generation-database", "none",
                           "--request-timeout", "30", "--no-color", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=500, check=False)


def _passed(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("token", ["t-ops", "t-alice", None])
def test_the_secured_aggregator_answers_every_generated_request_as_documented(live: Live, token: str | None,
                                                                              tmp_path: Path) -> None:
    """auth=kubernetes: cluster-wide (ops), one namespace (alice) and no token at all (401 everywhere but the
    probes and the document)."""
    header = ["--header", f"Authorization: Bearer {token}"] if token else []
    _passed(_schemathesis(f"{live.secured}/api/v1/openapi.json", *header, cwd=tmp_path))


def test_the_open_aggregator_answers_every_generated_request_as_documented(live: Live, tmp_path: Path) -> None:
    _passed(_schemathesis(f"{live.open}/api/v1/openapi.json", cwd=tmp_path))


@pytest.mark.parametrize("with_token", [True, False])
def test_the_agent_answers_every_generated_request_as_documented(live: Live, with_token: bool,
                                                                 tmp_path: Path) -> None:
    doc = tmp_path / "agent-openapi.json"
    doc.write_text(json.dumps(agent_openapi()))
    header = ["--header", f"Authorization: Bearer {live.agent_token}"] if with_token else []
    _passed(_schemathesis(str(doc), "--url", live.agent, *header, cwd=tmp_path))


def test_the_documents_differ_only_where_authentication_does(live: Live) -> None:
    """The secured aggregator's document adds the bearer scheme and the 401/503 answers; routes are the same."""
    secured = json.loads(get(f"{live.secured}/api/v1/openapi.json")[1])
    open_doc = json.loads(get(f"{live.open}/api/v1/openapi.json")[1])
    assert secured["openapi"] == open_doc["openapi"] == "3.1.0"
    assert set(secured["paths"]) == set(open_doc["paths"])
    assert "securitySchemes" in secured["components"] and "securitySchemes" not in open_doc["components"]
    report = secured["paths"]["/api/v1/report"]["get"]
    assert report["security"] == [{"bearer": []}] and {"401", "503"} <= set(report["responses"])
    assert "security" not in secured["paths"]["/readyz"]["get"]
