"""The simulated API server's TokenReview and SubjectAccessReview, asked through the real kubernetes_asyncio
client exactly as the aggregator asks a cluster's API server; and sim-cluster's users/<name>.token files.

Users (SCENARIO.md, ``users``): alice may get costs in ai-training; ops everywhere; prom is the ServiceAccount
monitoring/prometheus and may get /metrics only.
"""

from __future__ import annotations

import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from exporter.sim.kube.server import KubeApiServer
from exporter.sim.kube.store import KubeStore
from exporter.sim.runner import SimPeers
from exporter.sim.scenario import ScenarioError, parse_scenario

USERS = """
tick: 15s
duration: 1h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: n0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: p, namespace: ai-training, node: n0, gpus: 1}]
users:
  - {name: alice, token: t-alice, groups: [team-a], namespaces: [ai-training]}
  - {name: ops, token: t-ops, cluster: true}
  - {name: prom, token: t-prom, service_account: monitoring/prometheus, metrics: true}
"""


@pytest.fixture
async def api() -> AsyncIterator[client.ApiClient]:
    scenario = parse_scenario(USERS, "users.yaml")
    server = TestServer(KubeApiServer(KubeStore(), users=scenario.users).app)
    await server.start_server()
    cfg = client.Configuration(host=str(server.make_url("")).rstrip("/"))
    api_client = client.ApiClient(cfg)
    try:
        yield api_client
    finally:
        await api_client.close()
        await server.close()


async def _token_review(api: client.ApiClient, token: str) -> dict[str, Any]:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    resp = await client.AuthenticationV1Api(api).create_token_review(body, _preload_content=False)
    assert resp.status == 201
    doc: dict[str, Any] = await resp.json()
    assert doc["kind"] == "TokenReview" and doc["apiVersion"] == "authentication.k8s.io/v1"
    return dict(doc["status"])


async def _may(api: client.ApiClient, user: str, groups: list[str], **attrs: Any) -> bool:
    spec: dict[str, Any] = {"user": user, "groups": groups}
    spec.update(attrs)
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    resp = await client.AuthorizationV1Api(api).create_subject_access_review(body, _preload_content=False)
    assert resp.status == 201
    return bool((await resp.json())["status"]["allowed"])


def _costs(namespace: str, verb: str = "get") -> dict[str, Any]:
    return {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": "gpu-cost-exporter.io",
                                   "resource": "costs"}}


async def test_token_review_names_the_user_and_groups(api: client.ApiClient) -> None:
    """A listed token authenticates as its user (a ServiceAccount by its system: name); others do not."""
    alice = await _token_review(api, "t-alice")
    assert alice["authenticated"] is True
    assert alice["user"]["username"] == "alice"
    assert alice["user"]["groups"] == ["team-a", "system:authenticated"]
    prom = await _token_review(api, "t-prom")
    assert prom["user"]["username"] == "system:serviceaccount:monitoring:prometheus"
    assert "system:serviceaccounts:monitoring" in prom["user"]["groups"]
    stranger = await _token_review(api, "t-nobody")
    assert stranger["authenticated"] is False and stranger["user"] == {}


async def test_access_review_follows_the_users_rbac(api: client.ApiClient) -> None:
    """alice gets costs in ai-training only; ops everywhere and cluster-wide; prom only the /metrics URL."""
    assert await _may(api, "alice", ["team-a"], **_costs("ai-training"))
    assert not await _may(api, "alice", ["team-a"], **_costs("research"))
    assert not await _may(api, "alice", ["team-a"], **_costs(""))  # cluster-wide
    assert not await _may(api, "alice", ["team-a"], **_costs("ai-training", verb="delete"))
    assert await _may(api, "ops", [], **_costs("")) and await _may(api, "ops", [], **_costs("research"))
    sa = "system:serviceaccount:monitoring:prometheus"
    metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert await _may(api, sa, [], **metrics)
    assert not await _may(api, sa, [], **_costs("ai-training"))
    assert not await _may(api, "alice", ["team-a"], **metrics)
    assert not await _may(api, "mallory", [], **_costs("ai-training"))


@pytest.mark.parametrize(("users", "message"), [
    ("[{name: a, token: t}, {name: b, token: t}]", "users.yaml: users[1]: duplicate user name or token ('b')"),
    ("[{name: a, token: t, cluster: yes-please}]", "users.yaml: users[0].cluster: expected true or false"),
    ("[{name: a, token: t, service_account: prometheus}]", "users[0].service_account: expected <namespace>/<name>"),
    ("[{name: a}]", "users.yaml: users[0].token:"),
])
def test_bad_users(users: str, message: str) -> None:
    """A bad ``users`` entry fails with one line naming the field."""
    text = USERS.split("users:")[0] + f"users: {users}\n"
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(text, "users.yaml")


async def test_sim_cluster_writes_each_users_token(tmp_path: Path) -> None:
    """users/<name>.token holds the user's token, readable by its owner only; the aggregator's env asks for auth."""
    peers = SimPeers(parse_scenario(USERS, "users.yaml"), tmp_path, 1.0e9)
    await peers.start()
    try:
        tokens = {p.stem: p for p in (tmp_path / "users").iterdir()}
        assert sorted(tokens) == ["alice", "ops", "prom"]
        assert tokens["alice"].read_text() == "t-alice"
        assert stat.S_IMODE(tokens["prom"].stat().st_mode) == 0o600
        assert peers.aggregator_env()["GPUCOST_AUTH"] == "kubernetes"
        assert yaml.safe_load((tmp_path / "kubeconfig").read_text())["current-context"] == "sim"
    finally:
        await peers.close()
