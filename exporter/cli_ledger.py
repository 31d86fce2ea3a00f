"""The commands that read a ledger (``report``, ``recommend``, ``export``, ``pricing``, ``ledger verify``):
read-only, and a ledger an older build wrote is refused with a hint rather than migrated."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exporter.cli_common import UsageError, duration_arg, pricing_check
from exporter.cli_outputs import check_export_target, check_ledger_file, export_beside


def _check_schema(query: Any, ledger: Path | str) -> None:
    """A ledger an older build wrote is migrated by the aggregator, not by a read-only report."""
    from exporter.aggregator.ledger.store import SCHEMA_VERSION, redact

    version = next((int(v) for (v,) in query("SELECT value FROM meta WHERE key = 'schema_version'", ())), 0)
    if version < SCHEMA_VERSION:
        raise UsageError(f"{redact(str(ledger))}: ledger schema version {version} is older than this build's "
                         f"({SCHEMA_VERSION}); start the aggregator on it once to migrate it")


@contextlib.contextmanager
def _checked_reader(args: argparse.Namespace, *, errors: tuple[type[Exception], ...] = ()) -> Iterator[Any]:
    """The ``--ledger`` opened read-only, its schema checked; its errors and ``errors`` raised in the block become
    one-line usage errors."""
    from exporter.aggregator.ledger.store import LedgerError, open_reader

    check_ledger_file(args.ledger, flag="--ledger")
    caught: tuple[type[Exception], ...] = (LedgerError, *errors)
    try:
        with open_reader(args.ledger, password_file=args.ledger_password_file) as query:
            _check_schema(query, args.ledger)
            yield query
    except caught as exc:
        raise UsageError(str(exc)) from None


def _reprice_currency(rows: list[dict[str, Any]], *, pricing: Any, path: Path) -> None:
    """A what-if in another currency would print two currencies' amounts side by side as if comparable."""
    booked = sorted({str(r["currency"]) for r in rows} - {pricing.currency})
    if booked:
        raise UsageError(f"{path}: field currency: {pricing.currency} is not the currency of the ledger's rows "
                         f"({', '.join(booked)}); reprice with a document in the ledger's currency")


def report_command(args: argparse.Namespace) -> int:
    """``report``: cost by ``--by`` keys over a window from the ledger, optionally repriced or against budgets."""
    from exporter.aggregator.ledger.report import ReportError, build_report, parse_time, render

    if args.budgets or args.budget or args.budgets_file:
        return _budgets_report(args)
    what_if = pricing_check(args.reprice) if args.reprice is not None else None
    if what_if is not None and "," in args.by:
        raise UsageError("--reprice takes one --by key")
    now = time.time()
    try:
        since, until = parse_time(args.since, now), parse_time(args.until, now)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    with _checked_reader(args, errors=(ReportError,)) as query:
        rows = build_report(query, args.by, since=since, until=until, cluster=args.cluster)
        if what_if is not None:
            from exporter.aggregator.advice.reprice import reprice

            _reprice_currency(rows, pricing=what_if, path=args.reprice)
            rows = reprice(query, rows, by=args.by, since=since, until=until, pricing=what_if,
                           cluster=args.cluster)
    sys.stdout.write(render(rows, args.format, wide=args.wide))
    return 0


def _budgets_report(args: argparse.Namespace) -> int:
    from exporter.aggregator.advice.forecasts import forecasts, render
    from exporter.aggregator.kube.budgets import BudgetFileError, load_budgets

    window = duration_arg(args.forecast_window, "--forecast-window") or 0.0
    if window <= 0:
        raise UsageError("--forecast-window: must be longer than 0")
    try:
        budgets = load_budgets(path=args.budgets_file, pairs=args.budget)
    except BudgetFileError as exc:
        raise UsageError(str(exc)) from None
    with _checked_reader(args) as query:
        rows = forecasts(query, cluster=args.cluster, budgets=budgets, window_s=window)
    sys.stdout.write(render(rows, args.format, wide=args.wide))
    return 0


def recommend_command(args: argparse.Namespace) -> int:
    """``recommend``: right-sizing recommendations from the ledger's evidence over ``--window``."""
    from exporter.aggregator.advice.recommendations import explicit_window, recommendations, render, why_none
    from exporter.aggregator.ledger.report import ReportError
    from exporter.model.rightsizing.types import RuleSettings

    window = duration_arg(args.window, "--window") or 0.0
    evidence = duration_arg(args.min_evidence, "--min-evidence") or 0.0
    if window <= 0:
        raise UsageError("--window: must be longer than 0")
    if not 0 <= args.idle_threshold <= 1:
        raise UsageError("--idle-threshold: must be between 0 and 1")
    settings = RuleSettings(idle_threshold=args.idle_threshold, min_evidence_hours=evidence / 3600.0)
    try:
        since, until = explicit_window(args.since, args.until, now=time.time())
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    with _checked_reader(args, errors=(ReportError,)) as query:
        rows = recommendations(query, cluster=args.cluster, window_s=window, settings=settings, since=since,
                               until=until)
        none = "" if rows else why_none(query, cluster=args.cluster, min_evidence_s=evidence, window_s=window)
    sys.stdout.write(render(rows, args.format, wide=args.wide, none=none))
    return 0


def focus_command(args: argparse.Namespace) -> int:
    """``export``: the ledger's costs as FOCUS rows; ``pricing``: the rate card (price list per SKU) of a
    pricing file."""
    from exporter.aggregator.focus.commands import CommandError, export_window, run_export, run_price_list
    from exporter.aggregator.focus.rows import FocusSettings

    if args.command == "export":
        check_export_target(args.output, overwrite=args.overwrite)
    if args.ledger is not None:
        check_ledger_file(args.ledger, flag="--ledger")
    try:
        if args.command == "pricing":
            sys.stdout.write(run_price_list(pricing_file=args.pricing_file, ledger=args.ledger,
                                            password_file=args.ledger_password_file))
            return 0
        settings = FocusSettings(version=args.focus_version, cluster=args.cluster, billed_cost=args.billed_cost,
                                 host_provider=args.host_provider)
        window = export_window(args.since, args.until, now=time.time(), whole=args.whole)
        with export_beside(args.output) as target:
            try:
                run_export(ledger=args.ledger, fmt=args.format, window=window, settings=settings, output=target,
                           password_file=args.ledger_password_file)
            except CommandError as exc:  # it names the file written beside; the user named --output
                raise CommandError(str(exc).replace(target, args.output)) from None
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    return 0


def verify_command(args: argparse.Namespace) -> int:
    """``ledger verify``: one line per finding on stdout and exit 1, or exit 0; a summary on stderr."""
    from exporter.aggregator.ledger.backend import is_postgres
    from exporter.aggregator.ledger.verify import verify

    postgres = is_postgres(str(args.ledger))
    if not postgres and not Path(args.ledger).is_file():
        raise UsageError(f"{args.ledger}: no such ledger file")
    with _checked_reader(args) as query:
        findings = verify(query, postgres=postgres)
        if postgres and not query("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'", ()):
            print("ledger verify: the amcheck extension is not installed in this database: its indexes were not "
                  "checked (CREATE EXTENSION amcheck)", file=sys.stderr)
    for f in findings:
        sys.stdout.write(f.line() + "\n")
    print(f"ledger verify: {len(findings)} finding{'s' if len(findings) != 1 else ''}", file=sys.stderr)
    return 1 if findings else 0
