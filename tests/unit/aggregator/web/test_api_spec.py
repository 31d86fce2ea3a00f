"""The OpenAPI documents list exactly the routes the daemons serve, and are valid OpenAPI 3.1 (the schema
check, not a look-alike): a route added without its contract, or a contract without its route, fails here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.agent.api_spec import openapi as agent_openapi
from exporter.agent.http import build_app as agent_app
from exporter.aggregator.web.api_spec import openapi as aggregator_openapi
from exporter.aggregator.web.http import build_app as aggregator_app
from exporter.config import AggregatorSettings


def _served(app: web.Application) -> set[str]:
    return {r.resource.canonical for r in app.router.routes() if r.method == "GET" and r.resource is not None}


@pytest.mark.parametrize("auth", ["none", "kubernetes"])
def test_the_aggregator_document_lists_exactly_the_routes_it_serves(auth: str, tmp_path: Path) -> None:
    # The routes are registered when the app is built; no handler runs, so the view needs only its settings
    # (a plain namespace stands in: nothing is called on it).
    view: Any = SimpleNamespace(settings=AggregatorSettings(listen="127.0.0.1:1", ledger=tmp_path / "l.db",
                                                            auth=auth))  # type: ignore[arg-type]
    doc = aggregator_openapi(auth=auth == "kubernetes")
    assert _served(aggregator_app(view)) == set(doc["paths"])


def test_the_agent_document_lists_exactly_the_routes_it_serves() -> None:
    agent: Any = SimpleNamespace(usage_token=None, published_json=None)
    app = agent_app(agent, CollectorRegistry(), max_request_bytes=1 << 20)
    assert _served(app) == set(agent_openapi()["paths"])


@pytest.mark.parametrize("doc", [aggregator_openapi(auth=True), aggregator_openapi(auth=False), agent_openapi()],
                         ids=["aggregator-auth", "aggregator-open", "agent"])
def test_each_document_is_valid_openapi_3_1(doc: dict[str, Any]) -> None:
    from schemathesis.openapi import from_dict

    schema = from_dict(doc)
    assert doc["openapi"] == "3.1.0"
    assert len(list(schema.get_all_operations())) == len(doc["paths"])
    for op in doc["paths"].values():
        for answer in op["get"]["responses"].values():
            for media in answer.get("content", {}).values():
                ref = media["schema"].get("$ref") or media["schema"].get("items", {}).get("$ref")
                assert ref is None or ref.rsplit("/", 1)[-1] in doc["components"]["schemas"]
