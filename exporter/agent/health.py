"""The agent's own health: what its peers did at the last tick, read by /readyz and /metrics."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Health:
    """What the last ticks saw of DCGM, pod-resources and the state file; /readyz reports from it."""

    dcgm_up: bool = False
    podresources_up: bool = False
    last_tick_at: float = 0.0
    last_tick_duration: float = 0.0
    ticks: int = 0
    parse_errors: int = 0
    state_resets: int = 0
    unresolved: int = 0
    last_error: str = ""
    state_write_failures: int = 0
    state_write_error: str = ""  # non-empty while the last state write failed
    exporter_refused: str = ""  # non-empty while the exporter's scrape is refused: another node's (the reason)
    exporter_refusals: dict[str, int] = field(default_factory=dict)  # scrapes refused, by reason

    def not_ready(self) -> list[str]:
        """Why the agent cannot account its node right now (empty: ready). Read by /readyz and /metrics."""
        return [r for r, bad in (("dcgm down", not self.dcgm_up), ("pod-resources down", not self.podresources_up),
                                 (f"exporter refused: {self.exporter_refused}", bool(self.exporter_refused)),
                                 ("no tick yet", self.ticks == 0),
                                 (f"state write failing: {self.state_write_error}", bool(self.state_write_error)))
                if bad]
