"""A full disk under a PostgreSQL ledger, for real: the ledger's database lives in a tablespace on a small tmpfs
(``default_tablespace``: as a DBA gives a database's tables a volume of their own; the server's WAL and the
catalog stay in its data directory), filled between two
ticks. The server refuses the commit that needs a new page (SQLSTATE 53100); the ledger says why
(``disk_full``: down, one write failure counted) and the tick is not applied, so its seconds come back in the
next delta; once space returns every tick is booked exactly once: the ledger's totals equal, to the nano-unit,
those of the same ticks booked on a ledger that never filled.

The books: one node of 8 GPUs, each held by its own pod (80 holders: 10 pods a GPU-hour shift), snapshots every
10 minutes: new hour rows every sixth tick, so commits soon need pages the full volume cannot give."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import Ledger
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot
from tests.disk import fill, small_tmpfs
from tests.pg import PASSWORD, PgServer, start_server

pytestmark = pytest.mark.timeout(240)
H100 = "NVIDIA H100 80GB HBM3"
T0 = 1_800_000_000.0  # an hour boundary
STEP = 600.0
TICKS = 12
PODS = 40


def _snapshot(seq: int) -> UsageSnapshot:
    wall = seq * STEP
    return UsageSnapshot(
        node="n0", epoch="e1", timestamp=T0 + wall, seq=seq, started_at=T0,
        holders=[HolderCounters(namespace=f"team-{p % 5}", pod=f"job-{p}", container="c", device_id=f"GPU-{p % 8}",
                                gpu_uuid=f"GPU-n0-{p % 8}", gpu_model=H100, fraction=1.0 / 5, allocated_s=wall / 5,
                                used_s=wall / 10, unmeasured_s=0.0) for p in range(PODS)],
        unallocated=[UnallocatedCounter(gpu_model=H100, seconds=0.0)],
        capacity=[GpuCapacity(gpu_uuid=f"GPU-n0-{i}", gpu_model=H100) for i in range(8)])


async def _book(url: str, server: PgServer, *, full_after: int | None, filler: Path | None) -> list[int]:
    """Book every tick; with ``full_after``, the disk is filled after that tick and emptied after two failed
    commits. Returns the ticks whose commit failed."""
    ledger = Ledger(url, password_file=server.password_file)
    await ledger.open()
    failed: list[int] = []
    try:
        books, kube = Books(await ledger.load_state()), KubeState()
        kube.nodes["n0"] = {}
        pricing = parse_pricing(f'currency: USD\ndefault_price: 1\nmodels: {{"{H100}": 2.5}}\n', "p.yaml")
        seq = 1
        while seq <= TICKS:
            p = books.prepare([_snapshot(seq)], kube, pricing=pricing)
            try:
                await ledger.commit(p.write)
            except Exception:  # what the aggregator does: nothing applied, the next tick retries
                assert ledger.health.fault == "disk_full" and not ledger.up, ledger.health
                failed.append(seq)
                if len(failed) == 2 and filler is not None:
                    await asyncio.to_thread(filler.unlink)  # space returns
            else:
                books.apply(p)
                assert ledger.up
                if seq == full_after and filler is not None:
                    await asyncio.to_thread(fill, filler)
            seq += 1
    finally:
        await ledger.close()
    return failed


def _totals(server: PgServer, url: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, password=PASSWORD) as conn:
        rows = conn.execute("SELECT * FROM totals ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
    return [tuple(r) for r in rows]


def test_a_full_tablespace_books_every_tick_once_when_space_returns() -> None:
    import psycopg

    server = start_server()
    try:
        with small_tmpfs(server.root / "volume", size="2m") as volume:  # a folder the server may reach
            shutil.chown(volume, "postgres", "postgres")  # a tablespace's folder belongs to the server's user
            (volume / "ts").mkdir()
            shutil.chown(volume / "ts", "postgres", "postgres")
            with psycopg.connect(server.url(), password=PASSWORD, autocommit=True) as conn:
                conn.execute(f"CREATE TABLESPACE small LOCATION '{volume / 'ts'}'")
                conn.execute("CREATE DATABASE full_ledger")  # its catalog stays; the tables it makes go to the volume
                conn.execute("ALTER DATABASE full_ledger SET default_tablespace = small")
                conn.execute("CREATE DATABASE plain_ledger")
            full, plain = server.url("full_ledger"), server.url("plain_ledger")
            failed = asyncio.run(_book(full, server, full_after=3, filler=volume / "filler"))
            # a commit whose rows fit in pages the tables already have still succeeds on a full volume
            assert len(failed) == 2 and failed[0] > 3, failed
            assert asyncio.run(_book(plain, server, full_after=None, filler=None)) == []
            booked, reference = _totals(server, full), _totals(server, plain)
            assert booked == reference and booked
            allocated = sum((Decimal(str(v)) for v in _column(server, full, "allocated_s")), Decimal(0))
            assert allocated == 57_600  # 40 pods x 1/5 GPU = 8 GPUs, x 12 ticks x 600 s
            assert sum((Decimal(str(v)) for v in _column(server, full, "cost")), Decimal(0)) == Decimal("40.00")
            # 57,600 GPU-s = 16 GPU-hours x 2.50
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def _column(server: PgServer, url: str, name: str) -> list[object]:
    import psycopg

    with psycopg.connect(url, password=PASSWORD) as conn:
        return [r[0] for r in conn.execute(f"SELECT {name} FROM totals").fetchall()]
