"""The node agent's settings (``GPUCOST_*``, the settings file, ``gpu-cost-exporter agent --flags``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from exporter.settings.common import CommaList, DaemonSettings, Duration, SecretPath, check_urls


class AgentSettings(DaemonSettings):
    """The node agent (one per GPU node)."""

    node_name: str = Field(default="", description="this node's Kubernetes name (downward API)")
    dcgm_url: str = Field(default="http://localhost:9400/metrics", description="DCGM Exporter /metrics URL, or "
                          "AMD's or Gaudi's exporter; several comma-separated: the first that answers")
    device_metrics_url: str = Field(default="", description="vendor-neutral alias of dcgm_url; wins when set")
    exporter_mode: Literal["url", "discover"] = Field(
        default="url", description="url: scrape dcgm_url; discover: list this node's exporter pods in the API "
        "(exporter_selectors, spec.nodeName) and scrape their pod IP (needs list on pods)")
    exporter_selectors: str = Field(
        default="app=nvidia-dcgm-exporter@9400;app=nvidia-dcgm-exporter-dra@9400;"
        "app.kubernetes.io/name=dcgm-exporter@9400;app.kubernetes.io/name=metrics-exporter@5000;"
        "app=metric-exporter-ds@41611;app=habana-metric-exporter-ds@41611",
        description="discover: exporter pods as LABELS@PORT[/https];... (each upstream install's labels)")
    exporter_token_file: Path | None = Field(
        default=None, description="bearer token sent to https exporters (AMD's kube-rbac-proxy): the "
        "ServiceAccount token file")
    exporter_ca_file: Path | None = Field(
        default=None, description="CA bundle that verifies https exporters (default: the system's)")
    hami_monitor_url: str = Field(default="", description="HAMi vGPU monitor /metrics URL (its port is 9394), for "
                                  "measured per-pod use of HAMi-shared GPUs; empty: not read")
    dcgm_timeout: Duration = Field(default=5.0, description="DCGM scrape timeout")
    dcgm_max_bytes: int = Field(default=16 << 20, ge=4096, description="largest DCGM body accepted")
    dcgm_metric_names: str = Field(
        default="",
        description="extra metric-name table entries, 'NAME=quantity:scale,...' "
        "(quantity: util, gr_engine, fb_used, fb_free, power, energy)",
    )
    podresources_socket: Path = Field(
        default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        description="kubelet pod-resources unix socket",
    )
    podresources_timeout: Duration = Field(default=5.0, description="pod-resources call timeout")
    podresources_qps: float = Field(
        default=5.0, gt=0, description="this agent's own budget of kubelet calls per second (the kubelet allows "
        "100/s shared by all clients on the node)")
    resource_names: CommaList = Field(
        default_factory=list, description="extra device-plugin resource names to account (other vendors)"
    )
    listen: str = Field(default="0.0.0.0:9500", description="host:port the HTTP server listens on")
    state_dir: Path = Field(
        default=Path("/var/lib/gpu-cost-exporter"), description="where counters survive restarts"
    )
    watch_pods: bool = Field(
        default=False, description="watch this node's pods in the API: holders are charged from startTime to "
        "finishedAt to the second (else to the tick), pods shorter than a tick are charged, and finished pods "
        "that kubelets before 1.34 still list are ignored (needs get/list/watch on pods)")
    kubeconfig: Path | None = Field(default=None, description="kubeconfig for watch_pods; unset = in-cluster")
    kai_reservation_namespace: str = Field(
        default="kai-resource-reservation", description="where KAI Scheduler's binder runs its GPU reservation "
        "pods (its --resource-reservation-namespace); their GPUs are charged to the pods of their GPU group")
    nvml: bool = Field(default=True, description="resolve MIG instances through NVML when the library loads")
    state_fsync: bool = Field(default=True, description="fsync the state file every tick (off only for simulations)")
    max_charge_interval: Duration = Field(
        default=0.0, description="longest interval one tick may charge (default 4 x tick)"
    )
    retention: Duration = Field(default=3600.0, description="keep counters of gone pods this long after ack")
    safety_retention: Duration = Field(default=86400.0, description="drop gone pods' counters after this")
    usage_token_file: SecretPath = Field(
        default=None, description="when set, /v1/usage requires 'Authorization: Bearer <token in this file>'")
    max_holder_series: int = Field(default=5000, ge=1, description="per-holder series on /metrics before folding")

    @field_validator("dcgm_url", "device_metrics_url", "hami_monitor_url")
    @classmethod
    def _urls(cls, v: str) -> str:
        check_urls([u.strip() for u in v.split(",") if u.strip()])
        return v

    def charge_cap(self) -> float:
        """Seconds one tick may charge at most: ``max_charge_interval``, or 4 ticks when it is unset (0)."""
        return self.max_charge_interval or 4.0 * self.tick
