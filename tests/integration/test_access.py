"""Who may read costs, route by route: the real aggregator (GPUCOST_AUTH=kubernetes) asks the simulated API
server's TokenReview and SubjectAccessReview through its Kubernetes client (ARCHITECTURE.md, "Who may read
costs"; SCENARIO.md, ``users``).

Cluster: node n0 with 5 x H100 at 4.00/GPU-hour, 10 simulated minutes. ai-training holds 2 GPUs (train) + 1
idle GPU (nb-a); research holds 1 idle GPU (nb-r); nobody holds the 5th GPU, so the cluster rows carry
``__unallocated__``. alice may get costs in ai-training; ops cluster-wide; prom (monitoring/prometheus) only
/metrics.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from exporter.aggregator.service import Aggregator
from exporter.aggregator.web.http import build_app
from exporter.clock import VirtualClock
from exporter.pipeline import DEMO_ADVICE, Pipeline
from exporter.sim.runner import free_port
from exporter.sim.scenario import parse_scenario

H100 = "NVIDIA H100 80GB HBM3"
SCENARIO = f"""
tick: 15s
duration: 1h
prices: {{"{H100}": 4.0}}
nodes: [{{name: n0, model: "{H100}", gpus: 5}}]
namespaces:
  - {{name: ai-training, monthly_budget: 1000}}
  - {{name: research, monthly_budget: 500}}
pods:
  - {{name: train, namespace: ai-training, node: n0, gpus: 2, utilization: 0.9}}
  - {{name: nb-a, namespace: ai-training, node: n0, gpus: 1, utilization: 0.01}}
  - {{name: nb-r, namespace: research, node: n0, gpus: 1, utilization: 0.01}}
users:
  - {{name: alice, token: t-alice, groups: [team-a], namespaces: [ai-training]}}
  - {{name: ops, token: t-ops, cluster: true}}
  - {{name: prom, token: t-prom, service_account: monitoring/prometheus, metrics: true}}
"""
ROUTES = ["/", "/metrics", "/api/v1/report", "/api/v1/report?view=budgets", "/api/v1/recommendations",
          "/api/v1/focus?since=1h&until=now", "/api/v1/keda/utilization?namespace=ai-training"]
CLUSTER_ROWS = {"__unallocated__", "__unobserved__", "__unused_commitment__"}


@dataclass
class World:
    """The running pipeline and an HTTP client on its aggregator's app."""

    pipe: Pipeline
    agg: Aggregator
    http: TestClient[Any, Any]

    @property
    def reviews(self) -> dict[str, int]:
        """TokenReviews and SubjectAccessReviews the API server answered so far."""
        return dict(self.pipe.peers.api.reviews.reviews)

    async def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        """Status and body (JSON, CSV text, or HTML text) of GET ``path`` with ``token``."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        resp = await self.http.get(path, headers=headers)
        text = await resp.text()
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, text


@asynccontextmanager
async def open_world(tmp_path: Path, *, extra: dict[str, Any], ticks: int) -> AsyncIterator[World]:
    """The access scenario booked for ``ticks`` ticks (15 s each), its aggregator's routes on a test server."""
    pipe = Pipeline(parse_scenario(SCENARIO, "access.yaml"), tmp_path / "sim", clock=VirtualClock(1796860800.0),
                    ledger=tmp_path / "ledger.db", aggregator_extra={**DEMO_ADVICE, **extra})
    await pipe.start(serve_aggregator=False)
    assert pipe.aggregator is not None and pipe.aggregator.settings.auth == "kubernetes"
    try:
        for k in range(ticks):
            await pipe.step(k * 15)
        http: TestClient[Any, Any] = TestClient(TestServer(build_app(pipe.aggregator)))
        await http.start_server()
        try:
            yield World(pipe, pipe.aggregator, http)
        finally:
            await http.close()
    finally:
        await pipe.close()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with open_world(tmp_path, extra={}, ticks=41) as found:
        yield found


def _namespaces(rows: list[dict[str, Any]]) -> set[str]:
    return {r["namespace"] for r in rows}


async def test_no_token_or_an_unknown_one_is_401_on_every_route(world: World) -> None:
    """Every route but the probes answers 401 without a token, with a malformed header, and with a token the API
    server does not authenticate; the probes stay open (the kubelet has no token)."""
    for path in ROUTES:
        assert (await world.get(path))[0] == 401, path
        assert (await world.get(path, "t-nobody"))[0] == 401, path
        resp = await world.http.get(path, headers={"Authorization": "Basic dDp0"})
        assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer"), path
    assert (await world.get("/healthz"))[0] == 200
    assert (await world.get("/readyz"))[0] in (200, 503)


async def test_a_namespace_reader_sees_only_its_rows(world: World) -> None:
    """alice: the report, budgets, recommendations and FOCUS rows of ai-training only; no cluster rows; a
    grouping that sums namespaces together is refused; the KEDA value of her namespace only."""
    status, rows = await world.get("/api/v1/report", "t-alice")
    assert status == 200 and _namespaces(rows) == {"ai-training"}
    status, rows = await world.get("/api/v1/report?by=pod", "t-alice")
    assert status == 200 and {r["pod"] for r in rows} == {"train", "nb-a"}
    assert (await world.get("/api/v1/report?by=node", "t-alice"))[0] == 403
    status, rows = await world.get("/api/v1/report?view=budgets", "t-alice")
    assert status == 200 and _namespaces(rows) == {"ai-training"}
    status, rows = await world.get("/api/v1/recommendations", "t-alice")
    assert status == 200 and _namespaces(rows) == {"ai-training"}
    status, text = await world.get("/api/v1/focus?since=1h&until=now", "t-alice")
    focus = list(csv.DictReader(io.StringIO(text)))
    assert status == 200 and focus and {r["x_Namespace"] for r in focus} == {"ai-training"}
    assert (await world.get("/api/v1/keda/utilization?namespace=ai-training", "t-alice"))[0] == 200
    assert (await world.get("/api/v1/keda/utilization?namespace=research", "t-alice"))[0] == 403
    assert (await world.get("/metrics", "t-alice"))[0] == 403


async def test_a_namespace_reader_sees_no_other_clusters_rows(world: World) -> None:
    """A shared ledger holds other clusters' namespaces of the same name: this cluster's RBAC grants alice
    ai-training here, not anywhere else, so naming another cluster or grouping by cluster is refused."""
    for path in ("/api/v1/report?by=namespace&cluster=elsewhere", "/api/v1/report?by=cluster,namespace",
                 "/api/v1/focus?since=1h&until=now&cluster=elsewhere"):
        assert (await world.get(path, "t-alice"))[0] == 403, path
    status, rows = await world.get("/api/v1/report?by=cluster,namespace", "t-ops")
    assert status == 200 and {r["namespace"] for r in rows} >= {"ai-training"}


async def test_the_cluster_reader_sees_every_row_and_the_cluster_rows(world: World) -> None:
    """ops: both namespaces and __unallocated__ in the report, every FOCUS row, both namespaces' advice and
    budgets, and groupings across namespaces."""
    status, rows = await world.get("/api/v1/report", "t-ops")
    assert status == 200 and _namespaces(rows) == {"ai-training", "research", "__unallocated__"}
    assert _namespaces((await world.get("/api/v1/report?view=budgets", "t-ops"))[1]) == {"ai-training", "research"}
    assert _namespaces((await world.get("/api/v1/recommendations", "t-ops"))[1]) == {"ai-training", "research"}
    assert (await world.get("/api/v1/report?by=node", "t-ops"))[0] == 200
    focus = list(csv.DictReader(io.StringIO((await world.get("/api/v1/focus?since=1h&until=now", "t-ops"))[1])))
    assert {r["x_Namespace"] for r in focus} == {"ai-training", "research", ""}  # "": the unallocated capacity
    assert (await world.get("/api/v1/keda/utilization?namespace=research", "t-ops"))[0] == 200


async def test_prometheus_scrapes_metrics_but_reads_no_report(world: World) -> None:
    """prom: /metrics 200 with the request counter; every cost route 403."""
    await world.get("/api/v1/report")  # a 401, counted
    status, text = await world.get("/metrics", "t-prom")
    assert status == 200
    assert 'gpucost_http_requests_total{route="/api/v1/report",code="401"} 1' in text
    assert 'gpucost_auth_reviews_total{review="token",result="authenticated"} 1' in text
    for path in ROUTES:
        if path != "/metrics":
            assert (await world.get(path, "t-prom"))[0] == 403, path


async def test_the_status_page_shows_a_team_only_its_namespaces(world: World) -> None:
    """alice's status page names ai-training and never research; no pool totals or unused capacity; ops's page
    names both."""
    status, page = await world.get("/", "t-alice")
    assert status == 200 and "ai-training" in page and "research" not in page
    assert "held by nobody" not in page
    status, page = await world.get("/", "t-ops")
    assert status == 200 and "ai-training" in page and "research" in page and "held by nobody" in page


async def test_reviews_are_cached_by_token_and_decision(world: World) -> None:
    """The second and later calls with one token ask the API server nothing within the cache's lifetime."""
    before = world.reviews
    for _ in range(5):
        assert (await world.get("/api/v1/report", "t-ops"))[0] == 200
        assert (await world.get("/metrics", "t-prom"))[0] == 200
    after = world.reviews
    assert after["token"] - before["token"] == 2  # one per token
    assert after["access"] - before["access"] == 2  # ops cluster-wide; prom /metrics


async def test_a_review_the_api_server_cannot_answer_is_503_never_open(world: World, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """With the API server unreachable, a token nobody reviewed yet gets 503 on every route, not the data; the
    failure is logged, the token never."""
    dead = tmp_path / "dead-kubeconfig"
    doc = yaml.safe_load(world.pipe.peers.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    dead.write_text(yaml.safe_dump(doc))
    world.agg.settings = world.agg.settings.model_copy(update={"kubeconfig": dead})
    http: TestClient[Any, Any] = TestClient(TestServer(build_app(world.agg)))
    await http.start_server()
    try:
        for path in ROUTES:
            resp = await http.get(path, headers={"Authorization": "Bearer t-ops"})
            assert resp.status == 503, path
            assert "ai-training" not in await resp.text()
    finally:
        await http.close()
    logged = capsys.readouterr()
    assert "review_unavailable" in logged.out + logged.err
    assert "t-ops" not in logged.out + logged.err


@pytest.mark.parametrize("token", ["t-ops", "t-alice", "t-prom"])
async def test_an_access_review_the_api_server_refuses_after_the_token_review_is_503_never_open(
        world: World, token: str, capsys: pytest.CaptureFixture[str]) -> None:
    """TokenReview answers (the caller is authenticated) but every SubjectAccessReview is throttled (429): no
    decision, so every route answers 503, never the data and never as if allowed; the TokenReview path alone
    (the test above) never reaches this one. Counted as access errors, logged without the token."""
    world.pipe.peers.api.reviews.throttled = {"access"}
    for path in ROUTES:
        resp = await world.http.get(path, headers={"Authorization": f"Bearer {token}"})
        assert resp.status == 503, (path, resp.status)
        assert resp.headers["Retry-After"] == "5"
        body = await resp.text()
        assert "ai-training" not in body and "research" not in body and "gpucost_" not in body
    assert world.reviews["token"] >= 1  # the token was reviewed (and accepted) first
    logged = capsys.readouterr()
    assert "SubjectAccessReview: HTTP 429" in logged.out + logged.err
    assert token not in logged.out + logged.err
    world.pipe.peers.api.reviews.throttled = set()  # the API server answers again: so does every route
    status, text = await world.get("/metrics", "t-prom")
    assert status == 200
    errors = re.search(r'gpucost_auth_reviews_total\{result="error",review="access"\} (\S+)', text) or \
        re.search(r'gpucost_auth_reviews_total\{review="access",result="error"\} (\S+)', text)
    assert errors is not None and float(errors.group(1)) >= len(ROUTES)


async def test_200_concurrent_callers_cost_one_review_per_token_and_question(world: World) -> None:
    """100 scrapes (prom) and 100 report calls (alice) at once: one TokenReview per token, and one
    SubjectAccessReview per question (prom's /metrics; alice's cluster-wide, then each namespace the watch
    knows), not one per request; every request answered 200."""
    before = world.reviews
    answers = await asyncio.gather(*(world.get("/metrics", "t-prom") for _ in range(100)),
                                   *(world.get("/api/v1/report", "t-alice") for _ in range(100)))
    assert [status for status, _body in answers] == [200] * 200
    assert all(_namespaces(body) == {"ai-training"} for _status, body in answers[100:])
    after = world.reviews
    assert after["token"] - before["token"] == 2
    assert after["access"] - before["access"] == 1 + 1 + len(world.agg.kube.namespaces)
