"""The agent's own health: what its peers did at the last tick, read by /readyz and /metrics."""

from __future__ import annotations

from dataclasses import dataclass


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
