"""The agent's HTTP contract: its routes and answers, from the model the aggregator parses ``/v1/usage`` with.

The agent does not serve the document (one less route on every node, and no schema built in the agent's
memory budget): ``docs/api.md`` carries it, and the contract test (schemathesis) checks a live agent's answers
against it. ``tools/openapi_docs.py`` writes the page from here and from the aggregator's ``api_spec``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from exporter import __version__
from exporter.model.usage import UsageSnapshot
from exporter.openapi import Answer, Route, document


class AgentError(BaseModel):
    """A refusal: one line."""

    error: str


class AgentHealth(BaseModel):
    """``/healthz`` and ``/readyz``: "degraded" with its reasons while a peer is down or before the first tick."""

    status: str
    reasons: list[str]
    node: str
    dcgm_up: bool
    podresources_up: bool
    ticks: int
    epoch: str
    last_tick_at: float | None
    last_error: str | None
    state_write_failures: int


class UsageQuery(BaseModel):
    """``/v1/usage``."""

    ack: float | None = Field(default=None, description="the aggregator booked everything up to this time "
                              "(Unix seconds): counters of gone pods may be forgotten; honoured only with the token")


ROUTES: list[Route] = [
    Route("/metrics", "Prometheus metrics", {200: Answer("text exposition format 0.0.4", media="text/plain")},
          open=True),
    Route("/v1/usage", "the node's cumulative counters (what the aggregator books)",
          {200: Answer("the snapshot", UsageSnapshot), 400: Answer("ack is not a finite number", AgentError),
           401: Answer("the usage token is configured and was not sent", AgentError, headers=("WWW-Authenticate",)),
           503: Answer("no tick has completed yet", AgentError)}, query=UsageQuery),
    Route("/healthz", "liveness, with the health of each peer", {200: Answer("health", AgentHealth)}, open=True),
    Route("/readyz", "readiness", {200: Answer("ok", AgentHealth), 503: Answer("degraded (why: reasons)", AgentHealth)},
          open=True),
]


def openapi() -> dict[str, Any]:
    """The agent's OpenAPI 3.1 document (``/v1/usage`` needs the bearer token when ``usage_token_file`` is set)."""
    return document(title="gpu-cost-exporter agent", version=__version__, routes=ROUTES, bearer="optional",
                    description="One node's cumulative GPU counters, pulled by the aggregator.")
