"""The cluster aggregator's settings (``GPUCOST_*``, the settings file, ``gpu-cost-exporter aggregator --flags``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from exporter.model.budget_values import parse_budget
from exporter.model.shard_spec import Shard, hostname_ordinal
from exporter.settings.common import CommaList, DaemonSettings, Duration, SecretPath, check_urls


def _budget_map(value: object) -> object:
    """``{"ns": 1500}`` as JSON (what the chart renders) or ``ns=1500,other=200``; amounts positive decimals."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            value = json.loads(text)
        else:
            pairs = [p.partition("=") for p in text.split(",") if p.strip()]
            if any(not sep or not ns.strip() for ns, sep, _amount in pairs):
                raise ValueError("expected a JSON object or namespace=amount,namespace=amount")
            value = {ns.strip(): amount for ns, _sep, amount in pairs}
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of namespace to monthly amount")
    out: dict[str, float] = {}
    for ns, raw in value.items():
        amount = parse_budget(raw)
        if amount is None or not str(ns):
            raise ValueError(f"budget of {ns!r}: {raw!r} is not a positive amount")
        out[str(ns)] = amount
    return out


BudgetMap = Annotated[dict[str, float], BeforeValidator(_budget_map)]
# A path (SQLite) or a postgresql:// URL; always a str once validated (Path accepted for callers' ease).
LedgerTarget = Annotated[str | Path, BeforeValidator(lambda v: str(v))]


class AggregatorSettings(DaemonSettings):
    """The cluster aggregator (one per cluster)."""

    listen: str = Field(default="0.0.0.0:9501", description="host:port the HTTP server listens on")
    ledger: LedgerTarget = Field(
        default="/var/lib/gpu-cost-exporter/ledger.db",
        description="SQLite ledger file, or a postgresql://user@host:port/db URL (password from "
        "ledger_password_file or the URL's passfile=)")
    ledger_password_file: SecretPath = Field(default=None, description="password of a PostgreSQL ledger")
    cluster: str = Field(
        default="", max_length=63, description="this cluster's name, keying every ledger row (required with "
        "PostgreSQL, where many clusters may share one database; 'default' on SQLite)")
    pricing_file: Path | None = Field(default=None, description="pricing YAML/JSON (see docs)")
    agents: CommaList = Field(
        default_factory=list, description="comma-separated agent base URLs; unset = discover via the API"
    )
    kubeconfig: Path | None = Field(default=None, description="kubeconfig path; unset = in-cluster")
    agent_selector: str = Field(
        default="app.kubernetes.io/component=agent", description="label selector of agent pods"
    )
    agent_namespace: str = Field(
        default="", description="namespace where agent pods are discovered (empty = this pod's own namespace); "
        "pods elsewhere are never pulled")
    agent_port: int = Field(default=9500, description="port of the agents' HTTP server")
    agent_scheme: Literal["http", "https"] = Field(
        default="http", description="scheme of discovered agents' URLs (https when the agents serve TLS)")
    node_prune_grace: Duration = Field(
        default=600.0, description="close a deleted node's books (unobserved until its deletion) and forget its "
        "marks once it has been gone this long; a node that comes back sooner carries on")
    agent_tls_server_name: str = Field(
        default="", description="name the agents' TLS certificate carries (they are pulled by pod IP)")
    quota_event_retention: Duration = Field(
        default=7 * 86400.0, description="forget quota-rejection events not seen for this long (counts are kept)")
    pull_timeout: Duration = Field(default=10.0, description="per-agent pull timeout")
    pull_concurrency: int = Field(default=64, ge=1, description="agents pulled at once")
    pool_label: str = Field(default="gpu.platform/pool", description="node label naming the pool")
    team_label: str = Field(default="gpu.platform/team", description="namespace label naming the owning team")
    idle_threshold: float = Field(default=0.05, ge=0, le=1, description="utilisation below which a pod idles")
    ledger_retention: Duration = Field(default=400 * 86400.0, description="keep hourly rows this long")
    watch_timeout: Duration = Field(default=300.0, description="server-side timeout of one watch request")
    leader_election: bool = Field(default=False, description="elect one accounting leader among replicas (Lease)")
    lease_namespace: str = Field(default="default", description="namespace of the leader-election Lease")
    lease_name: str = Field(default="gpu-cost-exporter-aggregator", description="name of the Lease")
    lease_duration: Duration = Field(default=15.0, description="how long a lease lives without renewal")
    lease_renew_period: Duration = Field(default=5.0, description="how often the leader renews")
    agent_token_file: SecretPath = Field(default=None, description="bearer token the agents' /v1/usage requires")
    agent_ca_file: Path | None = Field(default=None, description="CA bundle to verify agents served over HTTPS")
    breakdown_series: bool = Field(
        default=False, description="also export allocated GPU-seconds and cost by namespace x pool x priority class")
    max_pods_per_namespace: int = Field(
        default=2000, ge=1, description="pod-level series per namespace before the rest fold into __overflow__")
    budgets: BudgetMap = Field(
        default_factory=dict, description="monthly GPU budget per namespace in the pricing currency, as JSON "
        "{\"ns\": 1500} or ns=1500,other=200; overrides the namespace annotation gpu.platform/monthly-budget")
    window_budgets_file: Path | None = Field(
        default=None, description="YAML file of budgets over windows (day, week, month, Nd) in GPU-hours and/or "
        "money for a namespace, team or scheduler queue, with an optional action (hold, drain); re-read when it "
        "changes")
    budget_dry_run: bool = Field(
        default=False, description="budgets that act only say (log, Event, counter) what they would do")
    recommend_window: Duration = Field(
        default=7 * 86400.0, description="right-sizing evidence window ending at the latest booked time (7d)")
    recommend_min_evidence: Duration = Field(
        default=86400.0, description="measured time a workload needs in the window before it is advised (24h)")
    recommend_refresh: Duration = Field(
        default=3600.0, description="how often (at most) the recommendations behind the metrics are recomputed (1h)")
    forecast_window: Duration = Field(
        default=86400.0, description="booked time the month-end forecast's burn rate is averaged over (24h)")
    forecast_refresh: Duration = Field(
        default=300.0, description="how often (at most) budgets' forecasts are recomputed after a commit")
    auth: Literal["none", "kubernetes"] = Field(
        default="none", description="kubernetes: every route but /healthz and /readyz needs a bearer token, "
        "authenticated by TokenReview and authorised by SubjectAccessReview (the chart's default)")
    auth_cache_ttl: Duration = Field(
        default=10.0, description="how long a token's review and an access decision are reused")
    auth_review_timeout: Duration = Field(default=5.0, description="timeout of one review by the API server")
    oidc_issuer: str = Field(
        default="", description="also accept this OIDC issuer's ID tokens, verified against its discovery document "
        "and JWKS (https URL, exactly as the tokens' iss); needs oidc_audience")
    oidc_audience: str = Field(default="", description="the aud OIDC ID tokens must carry (the client ID)")
    oidc_username_claim: str = Field(default="sub", description="the ID token's claim RBAC knows the user by")
    oidc_groups_claim: str = Field(default="groups", description="the ID token's claim listing the user's groups")
    shards: int = Field(
        default=1, ge=1, le=1024, description="aggregators sharing one cluster's nodes (rendezvous hashing of node "
        "names); more than 1 needs a PostgreSQL ledger")
    shard_index: int | None = Field(
        default=None, ge=0, description="this aggregator's shard, 0..shards-1 (default: the trailing ordinal of "
        "the hostname, as a StatefulSet names its pods; else 0)")

    @field_validator("agents")
    @classmethod
    def _agent_urls(cls, v: list[str]) -> list[str]:
        return check_urls(v)

    @field_validator("shards")
    @classmethod
    def _shards_share_postgres(cls, v: int, info: ValidationInfo) -> int:
        if v > 1 and not str(info.data.get("ledger", "")).startswith(("postgresql://", "postgres://")):
            raise ValueError("more than one shard needs a PostgreSQL ledger (GPUCOST_LEDGER), which they share")
        return v

    @field_validator("shard_index")
    @classmethod
    def _shard_in_range(cls, v: int | None, info: ValidationInfo) -> int:
        """Resolve the default from the hostname, and keep the index below the shard count."""
        shards = int(info.data.get("shards", 1))
        index = v if v is not None else (hostname_ordinal(socket.gethostname()) or 0) if shards > 1 else 0
        if not 0 <= index < shards:
            raise ValueError(f"shard index {index} (GPUCOST_SHARD_INDEX, else the hostname's ordinal) is not in "
                             f"0..{shards - 1} (GPUCOST_SHARDS={shards})")
        return index

    def shard(self) -> Shard:
        """This replica's shard."""
        return Shard(self.shard_index or 0, self.shards)

    def is_postgres(self) -> bool:
        """Whether ``ledger`` is a PostgreSQL URL rather than a SQLite file path."""
        return str(self.ledger).startswith(("postgresql://", "postgres://"))

    def cluster_name(self) -> str:
        """The cluster that keys this aggregator's rows (``default`` when unset, SQLite only)."""
        return self.cluster or "default"
