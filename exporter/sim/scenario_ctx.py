"""What every scenario field's validation needs: the file's name and one-line errors naming the field."""

from __future__ import annotations

import math
from typing import Any

from exporter.model.durations import parse_duration
from exporter.sim.spec import ScenarioError


class Ctx:
    """Validation helpers bound to one scenario file: each failure is ``file: field: message``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, msg: str) -> ScenarioError:
        """The ScenarioError for field ``where``, for the caller to raise."""
        return ScenarioError(f"{self.source}: {where}: {msg}")

    def duration(self, value: object, where: str) -> float:
        """A duration (``90s``, ``2h``, or a number of seconds) in seconds; never negative."""
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None

    def mapping(self, value: object, where: str) -> dict[str, Any]:
        """A mapping; an absent (null) field is an empty one."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: object, where: str) -> list[Any]:
        """A list; an absent (null) field is an empty one."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def string(self, value: object, where: str) -> str:
        """A non-empty string."""
        if not isinstance(value, str) or not value:
            raise self.fail(where, "expected a non-empty string")
        return value

    def number(self, value: object, where: str, *, lo: float | None = None, hi: float | None = None) -> float:
        """A finite number (not a bool) within ``[lo, hi]`` when bounds are given."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(where, f"expected a number, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self.fail(where, f"{value} is out of range [{lo}, {hi}]")
        return float(value)

    def integer(self, value: object, where: str, *, lo: int = 0) -> int:
        """An integer (not a bool) of at least ``lo``."""
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise self.fail(where, f"expected an integer >= {lo}, got {value!r}")
        return value

    def known_keys(self, raw: dict[str, Any], allowed: set[str], *, where: str) -> None:
        """Reject fields outside ``allowed``, so a misspelt field fails instead of being ignored."""
        for key in raw:
            if key not in allowed:
                raise self.fail(f"{where}.{key}" if where else str(key), "unknown field")
