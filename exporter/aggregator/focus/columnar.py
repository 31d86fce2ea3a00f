"""Whole hours of the ledger as Arrow columns in export order, with each row's computed amounts: the export's
fast path.

The rows are the ones ``rows.hour_rows`` makes (same order, same values; the golden files in
``tests/fixtures/focus`` hold both to the same bytes), computed differently. A batch of consecutive hours is
read with one query per table (``hour BETWEEN``), its columns go into Arrow at once (``zip(*rows)``, no
per-row object), and Arrow sorts them (by code point, as Python does). Amounts stay integer nano-units
(SQLite's stored integers; PostgreSQL's NUMERIC scaled in SQL). The arithmetic that needs more than 64 bits
(an origin's ratios, the recovered unit prices, the extended costs) is plain ``int`` arithmetic, once per
origin, cached on the origin's amounts (``_origin_amounts``): a fleet's node-hours repeat the same few.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from exporter.aggregator.focus.ledger_source import LedgerLayout, list_cost_sql
from exporter.aggregator.ledger.report import Query

NANO = 10**9
RATIO_ONE = 10**9  # AllocatedRatio has 9 digits, as every amount
TOLERANCE = 9  # price_point's 9e-7 per GPU-hour, as 9 x 10^-7
USAGE_TEXT = ("namespace", "pod", "workload", "node", "pool", "gpu_model", "mig_profile", "priority_class",
              "currency", "sharing", "scheduler", "queue")
CAPACITY_TEXT = ("node", "pool", "gpu_model", "currency")
USAGE_AMOUNTS = ("allocated_s", "used_s", "unmeasured_s", "idle_s", "cost", "list_cost", "idle_cost", "energy_j",
                 "co2e_g", "co2e_s")
CAPACITY_AMOUNTS = ("seconds", "cost", "list_cost", "co2e_g", "co2e_s")
_PLACES = {"energy_j": 3}  # energy in millijoules; every other amount: 9 digits
#: the export's order: origin (hour, node, pool, model, currency), holders before capacity (unallocated before
#: unobserved), holders by ``ledger_source``'s usage order
ORDER = [(k, "ascending") for k in ("hour", "node", "pool", "gpu_model", "currency", "kind", "namespace", "pod",
                                     "mig_profile", "workload", "priority_class", "sharing")]
_ORIGIN = ("hour", "node", "pool", "gpu_model", "currency")


class NotIntegerUnits(Exception):
    """The ledger's amounts are not integer units (a SQLite file from before exact amounts): use the rows path."""


def half_even(a: int, b: int) -> int:
    """``a / b`` (b > 0) rounded half-even to an integer: the one rounding of this module."""
    q, r = divmod(a, b)
    twice = 2 * r
    return q + 1 if twice > b or (twice == b and q & 1) else q


@lru_cache(maxsize=16384)
def price_point(cost: int, seconds: int) -> int | None:
    """``amounts.price_point`` of cost / GPU-hours, both in nano-units, as nano-units of price: the shortest
    decimal of 0 to 6 fractional digits within 9e-7 of the exact quotient, else the quotient to 9 digits.
    None when no time was booked. The quotient is the exact rational ``cost x 3600 / seconds``."""
    if seconds <= 0:
        return None
    numerator = cost * 3600
    for k in range(7):
        step: int = 10**k
        scaled = numerator * step
        m = half_even(scaled, seconds)
        if abs(m * seconds - scaled) * 10**7 <= TOLERANCE * seconds * step:
            return m * (NANO // step)
    return half_even(numerator * NANO, seconds)


def _one_price(costs: Sequence[int], seconds: Sequence[int]) -> bool:
    """``rows._one_price`` in nano-units: |c x S - C x s| <= 1e-6 x S, both sides scaled by 1e18."""
    total_c, total_s = sum(costs), sum(seconds)
    if total_c <= 0 or total_s <= 0:
        return False
    return all(abs(c * total_s - total_c * s) <= 1000 * total_s for c, s in zip(costs, seconds, strict=True))


def ratios_of(costs: Sequence[int], seconds: Sequence[int]) -> list[int]:
    """``rows.allocation_ratios`` in units of 1e-9: each share to the nearest, the largest taking the remainder,
    rounded down instead where that would leave the largest below another share or below 0."""
    basis = list(seconds) if sum(costs) <= 0 or _one_price(costs, seconds) else list(costs)
    total = sum(basis)
    if total <= 0:
        basis, total = [1 for _ in costs], len(costs)
    nearest = [half_even(b * RATIO_ONE, total) for b in basis]
    down = [b * RATIO_ONE // total for b in basis]
    for ratios in (nearest, down):
        largest = max(range(len(ratios)), key=lambda i: (ratios[i], basis[i]))  # a tie: the larger basis
        fixed = ratios[largest] + RATIO_ONE - sum(ratios)
        if fixed >= 0 and all(fixed >= r for i, r in enumerate(ratios) if i != largest):
            break
    ratios[largest] = fixed
    return ratios


class Amounts(NamedTuple):
    """An origin's computed columns, one value per row (nano-units; None where the row has no price)."""

    ratio: tuple[int, ...]
    hours: tuple[int, ...]
    list_price: tuple[int | None, ...]
    contracted: tuple[int | None, ...]
    list_cost: tuple[int, ...]
    contracted_cost: tuple[int, ...]


Origin = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[bool, ...]]


@lru_cache(maxsize=4096)  # a few MB at most, held across batches: an export's memory stays flat
def _origin_amounts(origin: Origin) -> Amounts:
    """``rows.origin_rows``'s amounts of one origin in ints, from its rows' costs, list costs, seconds and
    whether each is no MIG slice (which may take the origin's first list price when it booked no time).
    Cached: equal inputs give equal outputs."""
    costs, list_costs, seconds, whole = origin
    prices = [price_point(lc, s) for lc, s in zip(list_costs, seconds, strict=True)]
    fallback = next((p for p in prices if p is not None), None)
    cols: list[list[Any]] = [[], [], [], [], []]
    for cost, list_cost, secs, is_whole, price in zip(costs, list_costs, seconds, whole, prices, strict=True):
        hours = half_even(secs, 3600)
        list_price = price if price is not None else (fallback if is_whole else None)
        booked = price_point(cost, secs)
        contracted = booked if booked is not None else list_price
        if list_price is None or contracted is None:
            ext_list, ext_contracted = list_cost, cost
        else:
            ext_list, ext_contracted = half_even(list_price * hours, NANO), half_even(contracted * hours, NANO)
        for col, value in zip(cols, (hours, list_price, contracted, ext_list, ext_contracted), strict=True):
            col.append(value)
    return Amounts(tuple(ratios_of(costs, seconds)), *(tuple(c) for c in cols))


def _units_sql(column: str, *, dialect: str, places: int) -> str:
    return column if dialect == "sqlite" else f"CAST({column} * {10**places} AS BIGINT)"


def _select(texts: Sequence[str], amounts: Sequence[str], *, table: str, layout: LedgerLayout, dialect: str) -> str:
    exprs = ["hour"]
    for t in texts:
        absent = (t == "sharing" and not layout.sharing) or (t in ("scheduler", "queue") and not layout.queues)
        exprs.append(f"'' AS {t}" if absent else t)
    for a in amounts:
        if a in ("co2e_g", "co2e_s") and not layout.carbon:
            exprs.append(f"0 AS u_{a}")
            continue
        source = list_cost_sql(layout, table) if a == "list_cost" else a
        exprs.append(_units_sql(source, dialect=dialect, places=_PLACES.get(a, 9)) + f" AS u_{a}")
    return ", ".join(exprs)


def _ints(values: Sequence[Any]) -> pa.Array:
    """Integer units as int64; anything else (a REAL ledger's floats) is refused, never truncated."""
    arr = pa.array(values)
    if arr.type != pa.int64() and not (len(arr) == arr.null_count):
        raise NotIntegerUnits(f"amounts of type {arr.type}, not integer units")
    return arr.cast(pa.int64())


def _table(query: Query, sql: str, *, params: Sequence[Any], texts: Sequence[str],
           amounts: Sequence[str]) -> dict[str, pa.Array] | None:
    rows = query(sql, params)
    if not rows:
        return None
    cols = list(zip(*rows, strict=True))
    out = {"hour": pa.array(cols[0], pa.int64())}
    out |= {t: pa.array(c, pa.string()) for t, c in zip(texts, cols[1:], strict=False)}
    out |= {a: _ints(c) for a, c in zip(amounts, cols[1 + len(texts):], strict=True)}
    return out


def read_batch(query: Query, layout: LedgerLayout, *, first: int, last: int, dialect: str) -> pa.Table | None:
    """The usage and capacity rows of the hours ``first`` to ``last`` in export order: one column per ledger
    column (``seconds``: a holder's allocated or the capacity's), ``kind`` 0 for holders and 1, 2 for the capacity
    tables (``layout.capacity``'s order), ``state`` the row's x_CapacityState."""
    scope, scope_params = layout.scope()
    params = (first, last, *scope_params)
    parts: list[pa.Table] = []
    sql = (f"SELECT {_select(USAGE_TEXT, USAGE_AMOUNTS, table='usage', layout=layout, dialect=dialect)}"
           f" FROM usage WHERE hour >= ? AND hour <= ?{scope}")
    usage = _table(query, sql, params=params, texts=USAGE_TEXT, amounts=USAGE_AMOUNTS)
    if usage is not None:
        n = len(usage["hour"])
        usage["seconds"] = usage.pop("allocated_s")
        usage["energy_j"] = pc.multiply(usage["energy_j"], 10**6)  # millijoules -> nano-joules
        parts.append(_frame(usage, kind=0, state="Allocated", rows=n))
    for i, cap in enumerate(layout.capacity, start=1):
        sql = (f"SELECT {_select(CAPACITY_TEXT, CAPACITY_AMOUNTS, table=cap.table, layout=layout, dialect=dialect)}"
               f" FROM {cap.table} WHERE hour >= ? AND hour <= ?{scope}")
        got = _table(query, sql, params=params, texts=CAPACITY_TEXT, amounts=CAPACITY_AMOUNTS)
        if got is not None:
            parts.append(_frame(got, kind=i, state=cap.state, rows=len(got["hour"])))
    if not parts:
        return None
    return pa.concat_tables(parts).sort_by(ORDER)


_SCHEMA = pa.schema([("hour", pa.int64()), ("kind", pa.int8()), ("state", pa.string()),
                     *((t, pa.string()) for t in USAGE_TEXT),
                     *((a, pa.int64()) for a in ("seconds", "used_s", "unmeasured_s", "idle_s", "cost", "list_cost",
                                                 "idle_cost", "energy_j", "co2e_g", "co2e_s"))])


def _frame(cols: dict[str, pa.Array], *, kind: int, state: str, rows: int) -> pa.Table:
    """One table's columns in the shared schema: what a capacity row has no value for is null (0 for amounts,
    "" for the MIG profile)."""
    fill: dict[str, Any] = {"kind": pa.array([kind] * rows, pa.int8()), "state": pa.array([state] * rows, pa.string()),
                            "mig_profile": pa.array([""] * rows, pa.string())}
    arrays = []
    for field in _SCHEMA:
        if field.name in cols:
            arrays.append(cols[field.name])
        elif field.name in fill:
            arrays.append(fill[field.name])
        elif field.type == pa.string() or field.name == "energy_j":
            arrays.append(pa.nulls(rows, field.type))
        else:
            arrays.append(pa.repeat(pa.scalar(0, pa.int64()), rows))
    return pa.Table.from_arrays(arrays, schema=_SCHEMA)


def origin_starts(table: pa.Table) -> list[int]:
    """Where each origin (hour, node, pool, model, currency) begins in the sorted table, and its length last."""
    n = table.num_rows
    changed = None
    for name in _ORIGIN:
        col = table.column(name)
        diff = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        changed = diff if changed is None else pc.or_(changed, diff)
    inner = [] if changed is None else pc.add(pc.indices_nonzero(changed), 1).to_pylist()
    return [0, *inner, n]


def amounts(table: pa.Table) -> Amounts:
    """Every row's computed amounts (``_origin_amounts``, origin by origin), as columns."""
    costs, list_costs = table.column("cost").to_pylist(), table.column("list_cost").to_pylist()
    seconds = table.column("seconds").to_pylist()
    whole = pc.equal(table.column("mig_profile"), "").to_pylist()
    cols: list[list[Any]] = [[], [], [], [], [], []]
    for a, b in pairwise(origin_starts(table)):
        got = _origin_amounts((tuple(costs[a:b]), tuple(list_costs[a:b]), tuple(seconds[a:b]), tuple(whole[a:b])))
        for col, part in zip(cols, got, strict=True):
            col += part
    return Amounts(*(tuple(c) for c in cols))
