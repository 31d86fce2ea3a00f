"""``GET /api/v1/focus``: the FOCUS CSV export of a window, streamed an hour at a time.

The ledger (SQLite file or PostgreSQL database) is read through its own read-only connection, one read
transaction, on one worker thread, so neither the SQL nor the formatting runs on the event loop, the
aggregator keeps committing, and memory holds one hour of rows whatever the window.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from exporter.aggregator.focus.amounts import CostCarry
from exporter.aggregator.focus.export import rows_of_hour
from exporter.aggregator.focus.ledger_open import open_ledger
from exporter.aggregator.focus.ledger_source import Window, inspect_ledger, window_hours
from exporter.aggregator.focus.rows import FocusSettings
from exporter.aggregator.focus.writers import csv_sink
from exporter.aggregator.ledger.backend import LedgerError
from exporter.aggregator.ledger.report import ReportError, parse_time

T = TypeVar("T")
MAX_PARAM = 253


class FocusRequestError(ValueError):
    """A bad /api/v1/focus query; the message names the parameter."""


def parse_request(query: dict[str, str], now: float, *, cluster: str = "default") -> tuple[FocusSettings, Window]:
    """``cluster``: the SubAccountId when the request names none (the aggregator's own cluster)."""
    if any(len(v) > MAX_PARAM for v in query.values()):
        raise FocusRequestError("query parameter too long")
    if query.get("format", "csv") != "csv":
        raise FocusRequestError("format: only csv is served over HTTP (Parquet: gpu-cost-exporter export)")
    if not query.get("since") or not query.get("until"):
        raise FocusRequestError("since and until are required (RFC3339 or a duration back from now)")
    try:
        since, until = parse_time(query["since"], now), parse_time(query["until"], now)
    except ReportError as exc:
        raise FocusRequestError(str(exc)) from None
    if since is not None and until is not None and until < since:
        raise FocusRequestError("until is before since")
    version = query.get("focus_version", "1.3")
    if version not in ("1.2", "1.3"):
        raise FocusRequestError("focus_version: use 1.3 or 1.2")
    settings = FocusSettings(version=version, cluster=query.get("cluster") or cluster,
                             billed_cost=query.get("billed_cost", "effective"),
                             host_provider=query.get("host_provider") or None)
    try:
        settings.check()
    except ValueError as exc:
        raise FocusRequestError(str(exc)) from None
    return settings, Window(since, until)


async def stream_focus(req: web.Request, *, ledger: str, now: float, cluster: str = "default",
                       password_file: Path | None = None,
                       sees: Callable[[str], bool] | None = None) -> web.StreamResponse:
    """``ledger``: the aggregator's ledger, a SQLite file or a ``postgresql://`` URL. ``sees``: the namespaces a
    caller may read (rows of others, and the cluster's own rows, are left out); None: every row."""
    try:
        settings, window = parse_request(dict(req.query), now, cluster=cluster)
    except FocusRequestError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    if sees is not None and settings.cluster != cluster:  # this cluster's RBAC speaks for this cluster only
        return web.json_response({"error": "another cluster's rows need cluster-wide access"}, status=403)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="focus-export")
    loop = asyncio.get_running_loop()

    async def run(fn: Callable[[], T]) -> T:
        return await loop.run_in_executor(pool, fn)

    try:
        reader = await run(lambda: open_ledger(ledger, password_file=password_file))
    except FileNotFoundError:
        pool.shutdown(wait=False)
        return web.json_response({"error": "no ledger yet"}, status=503)
    except LedgerError as exc:
        pool.shutdown(wait=False)
        return web.json_response({"error": f"ledger unavailable: {exc}"}, status=503)
    query = reader.query
    buf = io.StringIO()
    sink = csv_sink(buf, settings.version)

    def take() -> str:
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text

    carry = CostCarry()  # one rounding carried through the window, as the CLI's export carries it

    def render(hour: int) -> str:
        rows = rows_of_hour(query, layout, hour=hour, settings=settings, carry=carry)
        sink.write(rows if sees is None else [r for r in rows if sees(str(r.get("x_Namespace") or ""))])
        return take()

    try:
        layout = await run(lambda: inspect_ledger(query, cluster=settings.cluster, dialect=reader.dialect))
        hours = await run(lambda: window_hours(query, layout, window=window))
        resp = web.StreamResponse(headers={"Content-Type": "text/csv; charset=utf-8",
                                           "Content-Disposition": 'attachment; filename="focus.csv"'})
        await resp.prepare(req)
        await resp.write((await run(take)).encode())
        for hour in hours:
            await resp.write((await run(partial(render, hour))).encode())
        await resp.write_eof()
        return resp
    finally:
        await run(reader.close)
        pool.shutdown(wait=False)
