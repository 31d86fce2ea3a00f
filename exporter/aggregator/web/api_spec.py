"""The aggregator's HTTP contract: every route, its query parameters and every answer, as pydantic models.

``build_app`` registers exactly these routes (a test holds the two lists equal); ``/api/v1/openapi.json``
serves the OpenAPI 3.1 document made from them, the docs page renders it, and the contract test
(schemathesis) checks every answer of a live aggregator against it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from exporter import __version__
from exporter.aggregator.ledger.report import FIELDS, GROUPS
from exporter.openapi import Answer, Route, document

MAX_PARAM = 253
Param = Field(default=None, max_length=MAX_PARAM)


class ApiError(BaseModel):
    """Every refusal: one line saying what was wrong (never a traceback)."""

    error: str


class Health(BaseModel):
    """``/healthz`` and ``/readyz``: ready once the books are loaded, the watch synced and this replica may book."""

    ready: bool
    leader: bool
    kube_synced: bool
    kube_up: bool
    ledger_up: bool
    ticks: int
    last_commit: float | None
    agents_up: int
    agents: int


class KedaValue(BaseModel):
    """A namespace's (or workload's) GPU utilisation over the last tick, 0..1 (KEDA's metrics-api scaler)."""

    value: float


_GROUP_COLUMNS = sorted({c for cols in GROUPS.values() for c in cols} | {"commitment"})
#: One report row: the ``by`` columns asked for, the booked amounts (exact decimals, written as JSON numbers)
#: and the currency; further columns (CO2e, repricing) may follow.
ReportRow: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "ReportRow", __config__=ConfigDict(extra="allow"),
    **{c: (str | None, None) for c in _GROUP_COLUMNS},
    **{f: (float, ...) for f in FIELDS},
    currency=(str, ...))


class Forecast(BaseModel):
    """One namespace's month (``view=budgets``): spend so far, burn rate, month-end forecast, budget crossing."""

    namespace: str
    month: str
    as_of: str | None
    budget: float | None
    spent: float
    burn_per_hour: float
    burn_window_hours: float
    hours_left: float
    forecast_month_cost: float
    over_budget: bool | None
    budget_crossing_day: str | None
    currency: str


class ReportAnswer(RootModel[list[ReportRow] | list[Forecast]]):  # type: ignore[valid-type]
    """Usage rows (``view=usage``, the default) or budget forecasts (``view=budgets``)."""


class Placement(BaseModel):
    """Where a workload runs (or would): GPU model, MIG profile or time-slicing replicas, GPUs."""

    gpu_model: str
    mig_profile: str
    gpus: float
    replicas: int


class Evidence(BaseModel):
    """What a recommendation rests on, over its window."""

    util_p50: float | None
    util_p95: float | None
    framebuffer_peak_bytes: float | None
    hours_observed: float


class Recommendation(BaseModel):
    """One right-sizing recommendation and its monthly saving (money to cents)."""

    namespace: str
    workload: str
    action: str
    current: Placement
    target: Placement
    evidence: Evidence
    monthly_cost_now: float
    monthly_cost_after: float
    monthly_savings: float
    currency: str
    reason: str


class ReportQuery(BaseModel):
    """``/api/v1/report``."""

    by: str | None = Field(default=None, max_length=MAX_PARAM, description="one or more of " + ", ".join(GROUPS)
                           + " (comma-separated); default namespace")
    cluster: str | None = Field(default=None, max_length=MAX_PARAM, description="only this cluster's rows")
    since: str | None = Field(default=None, max_length=MAX_PARAM,
                              description="RFC3339 time, a duration back from now (24h), or now")
    until: str | None = Field(default=None, max_length=MAX_PARAM, description="as since")
    view: Literal["usage", "budgets"] | None = Field(default=None, description="usage (default) or budgets")


class RecommendationsQuery(BaseModel):
    """``/api/v1/recommendations``."""

    window: str | None = Field(default=None, max_length=MAX_PARAM, description="evidence window (7d)")
    min_evidence: str | None = Field(default=None, max_length=MAX_PARAM, description="hours observed needed (24h)")
    since: str | None = Field(default=None, max_length=MAX_PARAM, description="start of the window instead")
    until: str | None = Field(default=None, max_length=MAX_PARAM, description="end of the window instead")


class KedaQuery(BaseModel):
    """``/api/v1/keda/utilization``."""

    namespace: str = Field(min_length=1, max_length=MAX_PARAM, description="the namespace")
    workload: str | None = Field(default=None, max_length=MAX_PARAM, description="one workload of it")


class FocusQuery(BaseModel):
    """``/api/v1/focus``: FOCUS CSV of a window, streamed hour by hour."""

    since: str = Field(min_length=1, max_length=MAX_PARAM, description="RFC3339 time or a duration back from now")
    until: str = Field(min_length=1, max_length=MAX_PARAM, description="RFC3339 time, a duration, or now")
    format: Literal["csv"] | None = Field(default=None, description="csv (Parquet: the export command)")
    focus_version: Literal["1.3", "1.2"] | None = Field(default=None, description="1.3 (default) or 1.2")
    cluster: str | None = Field(default=None, max_length=MAX_PARAM, description="SubAccountId (default: this one)")
    billed_cost: Literal["effective", "zero"] | None = Field(default=None, description="effective (default) or zero")
    host_provider: str | None = Field(default=None, max_length=MAX_PARAM, description="HostProviderName")


def _errors(*statuses: int) -> dict[int, Answer]:
    words = {400: "a bad parameter, named", 403: "the caller may not see this", 404: "nothing known for it",
             503: "the ledger is not available now"}
    return {s: Answer(words[s], ApiError) for s in statuses}


ROUTES: list[Route] = [
    Route("/", "the status page (HTML)", {200: Answer("the status page", media="text/html")}),
    Route("/metrics", "Prometheus metrics", {200: Answer("text exposition format 0.0.4", media="text/plain")}),
    Route("/api/v1/report", "costs and GPU-hours by any grouping, or budgets' month-end forecasts",
          {200: Answer("rows, most expensive first", ReportAnswer), **_errors(400, 403)}, query=ReportQuery),
    Route("/api/v1/keda/utilization", "utilisation of a namespace or workload (KEDA metrics-api)",
          {200: Answer("the value", KedaValue), **_errors(400, 403, 404)}, query=KedaQuery),
    Route("/api/v1/recommendations", "right-sizing recommendations",
          {200: Answer("recommendations, largest saving first", Recommendation, many=True), **_errors(400)},
          query=RecommendationsQuery),
    Route("/api/v1/focus", "FOCUS cost and usage rows of a window (CSV)",
          {200: Answer("FOCUS CSV", media="text/csv"), **_errors(400, 403, 503)}, query=FocusQuery),
    Route("/api/v1/openapi.json", "this document", {200: Answer("OpenAPI 3.1", media="application/json")},
          open=True),
    Route("/healthz", "liveness, with the health of each peer", {200: Answer("health", Health)}, open=True),
    Route("/readyz", "readiness", {200: Answer("ready", Health), 503: Answer("not ready (why: the fields)", Health)},
          open=True),
]


def openapi(*, auth: bool) -> dict[str, Any]:
    """The aggregator's OpenAPI 3.1 document; with ``auth``, every route but the probes and this document
    needs a bearer token (401 without, 503 while the API server cannot review it)."""
    routes = ROUTES
    if auth:
        gate = {401: Answer("no bearer token, or one that was not accepted", ApiError, headers=("WWW-Authenticate",)),
                503: Answer("access cannot be checked now (Retry-After)", ApiError, headers=("Retry-After",))}
        routes = [r if r.open else Route(r.path, r.summary, {**r.answers, **gate, 403: r.answers.get(
            403, Answer("the caller may not see this", ApiError))}, query=r.query) for r in ROUTES]
    return document(title="gpu-cost-exporter aggregator", version=__version__, routes=routes,
                    bearer="required" if auth else "none",
                    description="Costs, GPU-hours, budgets, recommendations and FOCUS rows from the ledger.")
