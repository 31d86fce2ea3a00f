"""Many-row upserts on PostgreSQL through ``COPY``: the rows go into a temporary table, then one ``INSERT …
SELECT … ON CONFLICT`` moves them into the ledger's table.

A tick writes tens of thousands of rows. ``executemany`` runs the upsert once per row (pipelined, still one
plan execution per row); ``COPY`` streams the rows (formatted by psycopg's C code) and the upsert runs once
for all of them. The conflict target and the ``DO UPDATE`` are the ones the caller wrote, so both backends
keep one SQL text. The staging table is made from the target's own columns (``CREATE … AS SELECT … WITH NO
DATA``), so every value lands in a column of its final type; it is emptied before each use (a transaction may
upsert one table twice) and at each commit. One statement
may not update a row twice, so rows repeating a conflict key (no caller sends them; this keeps it so) go
row by row as before.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

_INSERT = re.compile(r"^INSERT INTO (\w+) \(([^)]*)\) VALUES \((\?(?:, ?\?)*)\)( ON CONFLICT \(([^)]*)\) .*)$",
                     re.DOTALL)


def _names(text: str) -> list[str]:
    return [c.strip() for c in text.split(",")]


def copy_upsert(cur: Any, sql: str, *, rows: Sequence[tuple[Any, ...]]) -> bool:
    """Run ``sql`` (a ``?``-placeholder ``INSERT … VALUES (?, …) ON CONFLICT (…) …``) for all ``rows`` through
    ``COPY`` and one upsert; False, having done nothing, when ``sql`` is not such a statement or the rows repeat
    a conflict key."""
    m = _INSERT.match(sql)
    if m is None or "?" in m.group(4):
        return False
    table, cols, conflict = m.group(1), _names(m.group(2)), _names(m.group(5))
    if len(_names(m.group(3))) != len(cols) or not set(conflict) <= set(cols):
        return False
    where = [cols.index(c) for c in conflict]
    if len({tuple(r[i] for i in where) for r in rows}) != len(rows):
        return False
    listed = ", ".join(cols)
    stage = f"bulk_{table}_{zlib.crc32(listed.encode()):08x}"  # one staging table per column list
    cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                f"SELECT {listed} FROM {table} WITH NO DATA")
    cur.execute(f"DELETE FROM {stage}")  # a second upsert of this table in one transaction: its rows only
    with cur.copy(f"COPY {stage} ({listed}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cur.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {stage}{m.group(4)}")
    return True
