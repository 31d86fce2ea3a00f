"""Settings of both daemons, from flags, ``GPUCOST_*`` environment variables, an optional file, the defaults.

The import path the rest of the code uses; each daemon's settings live in their own module of
``exporter.settings`` and load nothing of the other daemon.
"""

from __future__ import annotations

from exporter.settings.agent import AgentSettings
from exporter.settings.aggregator import AggregatorSettings

__all__ = ["AgentSettings", "AggregatorSettings"]
