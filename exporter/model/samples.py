"""One Prometheus exposition sample as a plain type: what the parser (``clients/exposition``) yields and
the pure device model (``agent/exporters/dcgm``) reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Sample:
    """One exposition sample. ``labels`` may be shared between samples and scrapes: treat it as read-only.

    ``timestamp_ms`` is the number as written (milliseconds): an int when written as one, else a float.
    """

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: float | None = None
