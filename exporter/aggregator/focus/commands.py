"""``gpu-cost-exporter export`` and ``pricing --format focus-price-list``: arguments in, files out.

Bad input raises ``CommandError`` with one line naming the file or flag; the CLI turns it into exit 2
before anything is written.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from exporter.aggregator.focus.export import export, focus_hours
from exporter.aggregator.focus.ledger_open import LedgerReader, open_ledger
from exporter.aggregator.focus.ledger_source import LedgerLayout, Window, inspect_ledger, ledger_clusters
from exporter.aggregator.focus.rate_card import (
    PriceEntry,
    PriceMismatch,
    booked_price,
    commitment_prices,
    file_keys,
    price_list,
    published_price,
    render_price_list,
)
from exporter.aggregator.focus.rows import FocusSettings
from exporter.aggregator.focus.writers import ARROW, ParquetSink, csv_sink, metadata
from exporter.aggregator.ledger.backend import LedgerError
from exporter.model.pricing.document import Pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts


class CommandError(ValueError):
    """Bad input to an export command."""


def export_window(since: str | None, until: str | None, *, now: float, whole: bool = False) -> Window:
    """The window of ``--since`` / ``--until`` (absolute or relative to ``now``); CommandError if unusable.

    A finance export is a month's books, so ``--until`` defaults to now and ``--since`` to the start of
    ``--until``'s UTC month (the month to date); ``whole`` (``--all``) is the whole ledger instead."""
    from exporter.aggregator.ledger.report import ReportError, parse_time

    if whole:
        if since is not None or until is not None:
            raise CommandError("--all exports the whole ledger: leave out --since and --until")
        return Window(None, None)
    try:
        start, end = parse_time(since, now), parse_time(until, now)
    except ReportError as exc:
        raise CommandError(str(exc)) from None
    if end is None:
        end = now
    if start is None:
        start = month_start(end)
    if end < start:
        raise CommandError("--until is before --since")
    return Window(start, end)


def month_start(t: float) -> float:
    """The start of the UTC calendar month that holds ``t`` (a FOCUS billing period's start)."""
    day = datetime.fromtimestamp(t, tz=UTC)
    return datetime(day.year, day.month, 1, tzinfo=UTC).timestamp()


def _open(ledger: str, password_file: Path | None) -> LedgerReader:
    try:
        return open_ledger(ledger, password_file=password_file)
    except (FileNotFoundError, LedgerError) as exc:
        raise CommandError(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{ledger}: not a gpu-cost-exporter ledger ({exc})") from None


def run_export(*, ledger: str, fmt: str, window: Window, settings: FocusSettings, output: str,
               password_file: Path | None = None) -> int:
    """Export the window to ``output`` (``-`` = stdout) and, for a file, its metadata beside it; ``ledger`` a
    SQLite file or a ``postgresql://`` URL."""
    try:
        settings.check()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if output != "-" and not Path(output).parent.is_dir():
        raise CommandError(f"--output {output}: no such directory")
    if fmt == "focus-parquet" and not ARROW:
        raise CommandError("--format focus-parquet needs pyarrow: pip install 'gpu-cost-exporter[focus]'")
    reader = _open(ledger, password_file)
    try:
        inspect_ledger(reader.query, dialect=reader.dialect)  # fail on a foreign file before creating the output
        rows = _write(reader, fmt=fmt, window=window, settings=settings, output=output)
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise CommandError(f"{reader.where}: not a gpu-cost-exporter ledger ({exc})") from None
    except LedgerError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"--output {output}: {exc.strerror or exc}") from None
    finally:
        reader.close()
    if output != "-":
        meta = Path(output + ".metadata.json")
        meta.write_text(metadata(settings, file_name=Path(output).name, created=time.time(), rows=rows))
    return rows


def _write(r: LedgerReader, *, fmt: str, window: Window, settings: FocusSettings, output: str) -> int:
    if fmt == "focus-csv":
        if output == "-":
            return export(r.query, csv_sink(sys.stdout, settings.version), settings=settings, window=window,
                          dialect=r.dialect)
        with Path(output).open("w", encoding="utf-8", newline="") as fh:
            return export(r.query, csv_sink(fh, settings.version), settings=settings, window=window,
                          dialect=r.dialect)
    target: str | IO[bytes] = sys.stdout.buffer if output == "-" else output
    sink = ParquetSink(target, settings.version)
    try:
        return export(r.query, sink, settings=settings, window=window, dialect=r.dialect)
    finally:
        sink.close()


def run_price_list(*, pricing_file: Path, ledger: str | None, password_file: Path | None = None) -> str:
    """The price list of every SKU the pricing file names (each pool's too), or of every SKU the ledger's rows
    reference, each priced from the pricing file: a booked list price it does not publish is refused."""
    from exporter.aggregator.books.pricing_source import load_pricing_file
    from exporter.model.pricing.document import PricingError

    try:
        pricing = load_pricing_file(pricing_file)
    except PricingError as exc:
        raise CommandError(str(exc)) from None
    if ledger is None:
        return render_price_list(price_list(pricing, file_keys(pricing)) + commitment_prices(pricing))
    reader = _open(ledger, password_file)
    try:
        entries = _ledger_prices(reader, pricing)
    except PriceMismatch as exc:
        raise CommandError(f"{reader.where}: {exc} ({pricing_file})") from None
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise CommandError(f"{reader.where}: not a gpu-cost-exporter ledger ({exc})") from None
    except LedgerError as exc:
        raise CommandError(str(exc)) from None
    finally:
        reader.close()
    return render_price_list(sorted(entries.values(), key=lambda e: (e.sku_id, e.unit_price)))


def _node_facts(reader: LedgerReader, layout: LedgerLayout, *, cluster: str) -> dict[str, NodeFacts]:
    """Each node's instance and capacity type as the ledger last saw them (what its list price depends on
    beyond model, MIG profile and pool); the table came with commitments (schema 4), so older ledgers have none."""
    if not layout.commitments:
        return {}
    out: dict[str, NodeFacts] = {}
    for node, instance_type, capacity_type in reader.query(
            "SELECT node, instance_type, capacity_type FROM node_billing WHERE cluster = ?", (cluster,)):
        try:
            kind = CapacityType(str(capacity_type))
        except ValueError:
            kind = CapacityType.ON_DEMAND
        out[str(node)] = NodeFacts(str(node), None, str(instance_type or "") or None, kind)
    return out


def _ledger_prices(reader: LedgerReader, pricing: Pricing) -> dict[str, PriceEntry]:
    """Every price the ledger's export cites, checked against the pricing file row by row, an hour at a time."""
    entries: dict[str, PriceEntry] = {}
    for cluster in ledger_clusters(reader.query, dialect=reader.dialect):  # exactly what an export cites
        layout = inspect_ledger(reader.query, cluster=cluster, dialect=reader.dialect)
        list_is_effective = "usage" not in layout.list_cost_in  # a ledger from before list prices
        nodes = _node_facts(reader, layout, cluster=cluster)
        settings = FocusSettings(cluster=cluster)
        for rows in focus_hours(reader.query, settings, window=Window(None, None), dialect=reader.dialect):
            for row in rows:
                booked = booked_price(row)
                if booked is None:
                    continue
                node = str(row.get("ResourceName") or "")
                entry = published_price(pricing, booked, hour=int(str(row["ChargePeriodStart"])),
                                        node=nodes.get(node, NodeFacts(node, None)) if node else None,
                                        list_is_effective=list_is_effective)
                entries.setdefault(entry.sku_price_id, entry)
    return entries
