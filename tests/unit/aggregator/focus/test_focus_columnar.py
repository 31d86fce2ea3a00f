"""The columnar export against the row exporter it replaced, on random ledgers with what the golden files lack:
texts CSV must quote and JSON must escape (commas, quotes, backslashes, line breaks, non-ASCII), queues, MIG
slices, spot and reserved nodes, teams, CO2e, unobserved capacity, unused commitments, rows with neither time
nor cost, hours that straddle batches. The reference is ``rows.focus_hours`` written by the stdlib
``csv.writer`` as the exporter before Arrow wrote it (decimals by ``format.decimal_text``, times by
``utc_text``); Parquet is compared with the row exporter's rows in the same columns."""

from __future__ import annotations

import asyncio
import csv
import io
import random
import sqlite3
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.aggregator.focus import export as focus_export
from exporter.aggregator.focus.amounts import exact_hours, unit_price
from exporter.aggregator.focus.columnar import price_point, ratios_of
from exporter.aggregator.focus.columns import ColumnType, columns_for
from exporter.aggregator.focus.export import export, focus_hours, open_readonly, query_of
from exporter.aggregator.focus.format import decimal_text, utc_text
from exporter.aggregator.focus.ledger_source import Window
from exporter.aggregator.focus.rows import FocusSettings, allocation_ratios
from exporter.aggregator.focus.writers import CsvSink, ParquetSink
from exporter.aggregator.ledger.store import Ledger

H0 = 1_796_000_400  # an hour boundary
NANO = 10**9
#: per seed, one of: texts CSV never quotes; texts only JSON escapes (and non-ASCII); every kind
TEXTS = (("a", "café", ""), ("back\\slash", "line\nbreak", "tab\there", "café"),
         ("a", "train,er", 'say "hi"', "back\\slash", "line\nbreak", "café", "tab\there", ""))
MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")


def _ledger(path: Path, rng: random.Random, *, texts: tuple[str, ...]) -> None:
    def _name(stem: str) -> str:
        return f"{stem}-{rng.randrange(4)}" if rng.random() < 0.7 else f"{stem}-{rng.choice(texts)}"

    odd = "," in "".join(texts)  # nodes, pools and commitments with a comma or a quote too
    async def create() -> None:
        ledger = Ledger(path, cluster="default")
        await ledger.open()
        await ledger.close()

    asyncio.run(create())
    conn = sqlite3.connect(path)
    nodes = [f"node,{i}" if odd and i == 1 else f"node-{i}" for i in range(rng.randint(1, 4))]
    conn.executemany("INSERT INTO node_billing (cluster, node, instance_type, capacity_type) VALUES (?,?,?,?)",
                     [("default", n, "", rng.choice(("on-demand", "spot", "reserved", ""))) for n in nodes])
    for h in range(rng.randint(1, 6)):
        hour = H0 + h * 3600
        for node in nodes:
            pool, model = rng.choice(("", "train", 'p"q' if odd else "infer")), rng.choice(MODELS)
            seen: set[tuple[str, ...]] = set()
            for _ in range(rng.randint(0, 4)):
                key = (_name("ns"), _name("pod"), _name("wl"),
                       rng.choice(("", "1g.10gb", "3g.40gb")) if "A100" in model else "",
                       rng.choice(("", "high,prio" if odd else "high")), rng.choice(("", "none", "kai")),
                       *rng.choice((("", ""), ("kueue", "team-a/train"), ("kai", 'q"x' if odd else "q\\x"))))
                if key in seen:
                    continue
                seen.add(key)
                secs = rng.choice((0, 3600 * NANO, rng.randrange(1, 7200) * NANO // 7))
                cost = 0 if secs == 0 and rng.random() < 0.5 else rng.randrange(0, 40 * NANO)
                conn.execute("INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, "
                             "mig_profile, priority_class, currency, claim, sharing, scheduler, queue, allocated_s, "
                             "used_s, unmeasured_s, idle_s, cost, idle_cost, energy_j, list_cost, co2e_g, co2e_s) "
                             "VALUES (?,?,?,?,?,?,?,?,?,?,?,'',?,?,?,?,?,?,?,?,?,?,?,?,?)",
                             ("default", hour, key[0], key[1], key[2], node, pool, model, key[3], key[4], "USD",
                              key[5], key[6], key[7], secs, secs // 2, 0, secs - secs // 2, cost, cost // 3,
                              rng.randrange(10**7), cost + rng.choice((0, NANO)), rng.randrange(10**12),
                              rng.choice((0, secs))))
            for table in ("unallocated", "unobserved"):
                if rng.random() < 0.6:
                    secs = rng.randrange(0, 8) * 3600 * NANO
                    conn.execute(f"INSERT INTO {table} (cluster, hour, node, pool, gpu_model, currency, seconds, "
                                 "cost, list_cost) VALUES (?,?,?,?,?,?,?,?,?)",
                                 ("default", hour, node, pool, model, "USD", secs, secs // 900, secs // 900))
        if rng.random() < 0.4:
            conn.execute("INSERT INTO unused_commitment (cluster, hour, commitment, gpu_model, currency, seconds, "
                         "cost, list_cost) VALUES (?,?,?,?,?,?,?,?)",
                         ("default", hour, rng.choice(("c1", "c,2" if odd else "c2")), MODELS[0], "USD",
                          7200 * NANO, 5 * NANO, 0))
        for ns in ("ns-0", "ns-1", *(f"ns-{t}" for t in texts)):
            if rng.random() < 0.5:
                conn.execute("INSERT INTO namespace_team (cluster, hour, namespace, team) VALUES (?,?,?,?)",
                             ("default", hour, ns, rng.choice(("ml", *texts))))
    conn.commit()
    conn.close()


def _stdlib_csv(conn: sqlite3.Connection, window: Window) -> str:
    """The row exporter's output as it wrote it: each row's cells by ``csv.writer``."""
    columns = columns_for("1.3")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.name for c in columns])
    for rows in focus_hours(query_of(conn), FocusSettings(), window=window):
        for row in rows:
            cells = []
            for c in columns:
                v = row.get(c.name)
                if v is not None and c.type is ColumnType.DECIMAL:
                    assert isinstance(v, Decimal)
                    v = decimal_text(v)
                elif v is not None and c.type is ColumnType.DATETIME:
                    v = utc_text(int(str(v)))
                cells.append(v)
            writer.writerow(cells)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(12))
def test_columnar_csv_is_the_row_exporters_bytes(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(focus_export, "BATCH_ROWS", random.Random(seed).choice((1, 7, 4000)))  # batches of 1 hour+
    path = tmp_path / "ledger.db"
    _ledger(path, random.Random(seed), texts=TEXTS[seed % 3])
    conn = open_readonly(path)
    window = Window(None, None)
    out = io.StringIO()
    export(query_of(conn), CsvSink(out, "1.3"), settings=FocusSettings(), window=window)
    assert out.getvalue() == _stdlib_csv(conn, window)


@pytest.mark.parametrize("seed", range(4))
def test_columnar_parquet_holds_the_row_exporters_values(seed: int, tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path, random.Random(seed), texts=TEXTS[seed % 3])
    conn = open_readonly(path)
    window = Window(None, None)
    columnar = ParquetSink(str(tmp_path / "columnar.parquet"), "1.3")
    export(query_of(conn), columnar, settings=FocusSettings(), window=window)
    columnar.close()
    rows = ParquetSink(str(tmp_path / "rows.parquet"), "1.3")
    for hour in focus_hours(query_of(conn), FocusSettings(), window=window):
        rows.write(hour)
    rows.close()
    got, want = (pq.read_table(tmp_path / f"{n}.parquet") for n in ("columnar", "rows"))
    assert got.num_rows == want.num_rows
    assert pa.Table.from_batches(got.to_batches()).to_pylist() == want.to_pylist()


_UNITS = st.lists(st.tuples(st.integers(0, 50 * NANO), st.integers(0, 8 * 3600 * NANO)), min_size=1, max_size=6)


@given(_UNITS)
def test_ratios_in_integers_are_the_row_exporters(shares: list[tuple[int, int]]) -> None:
    """``columnar.ratios_of`` on nano-units gives ``rows.allocation_ratios`` of the same decimals, digit for digit."""
    costs, seconds = [c for c, _s in shares], [s for _c, s in shares]
    want = allocation_ratios([Decimal(c).scaleb(-9) for c in costs], [Decimal(s).scaleb(-9) for s in seconds])
    assert [Decimal(r).scaleb(-9) for r in ratios_of(costs, seconds)] == want


def test_one_price_tolerance_is_1e_6_of_the_seconds() -> None:
    """Two GPU-hours at 1.00 and at 1.00 + d: c1 x S - C x s1 = (1 + d) x 7200 - (2 + d) x 3600 = 3600 d, one price
    while that is at most 1e-6 x 7200, so d <= 0.000002 splits by GPU-seconds (0.5 each) and d = 0.000003 by cost:
    1.000003 / 2.000003 = 0.50000075 (to 9 digits 0.500000750), the other 0.499999250."""
    hour = 3600 * NANO
    assert ratios_of([1_000_002_000, NANO], [hour, hour]) == [500_000_000, 500_000_000]
    assert ratios_of([1_000_003_000, NANO], [hour, hour]) == [500_000_750, 499_999_250]


@given(st.integers(0, 10**6 * NANO), st.integers(0, 10**6 * NANO))
def test_price_points_in_integers_are_the_row_exporters(cost: int, seconds: int) -> None:
    """``columnar.price_point`` (nano-units) is ``amounts.unit_price`` of the same decimals."""
    want = unit_price(Decimal(cost).scaleb(-9), exact_hours(Decimal(seconds).scaleb(-9)))
    got = price_point(cost, seconds)
    assert (None if got is None else Decimal(got).scaleb(-9)) == want
