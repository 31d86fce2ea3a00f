"""What every command of the entry point shares: the one-line usage error and argument checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


def duration_arg(text: str | None, flag: str) -> float | None:
    """Seconds in ``text`` (None when the flag was not given); a bad duration is a usage error naming ``flag``."""
    from exporter.model.durations import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def budgets_check(path: Path | None) -> None:
    """The budgets-over-windows file, validated at start (one line naming file and field, exit 2); later edits
    that do not parse are logged and the last good budgets kept."""
    if path is None:
        return
    from exporter.aggregator.advice.window_budgets import load_budgets_file
    from exporter.model.budget_windows import BudgetsFileError

    try:
        load_budgets_file(path)
    except BudgetsFileError as exc:
        raise UsageError(str(exc)) from None


def pricing_check(path: Path | None) -> Any:
    """The pricing file or directory, validated (one line naming file and field, exit 2)."""
    from exporter.aggregator.books.pricing_source import load_pricing_file
    from exporter.model.pricing.document import PricingError

    try:
        return load_pricing_file(path)
    except PricingError as exc:
        raise UsageError(str(exc)) from None
