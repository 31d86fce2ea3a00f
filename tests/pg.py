"""A real PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` as the ``postgres`` user on a free loopback port.

The server refuses to run as root, so every server command runs through ``runuser -u postgres``; the data
directory is a temp dir owned by postgres. Connections over TCP need a password (scram-sha-256), so
tests exercise the password file for real. One server per test session; each test gets its own database.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "ledger-test-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(*args: str) -> None:
    runuser = shutil.which("runuser") if os.geteuid() == 0 else None
    cmd = [runuser, "-u", "postgres", "--", *args] if runuser else list(args)
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


@dataclass
class PgServer:
    """One running server; ``database()`` makes a fresh empty database and returns its URL."""

    root: Path
    port: int
    password_file: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def database(self) -> str:
        import psycopg

        name = f"ledger_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), password=PASSWORD, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def start(self) -> None:
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                     "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self, *, mode: str = "immediate") -> None:
        """``immediate`` kills the server as a crash would; ``fast`` ends sessions and shuts down cleanly."""
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")


def start_server() -> PgServer:
    """initdb a fresh data directory in a temp dir owned by postgres and start it (``server.stop()`` and
    remove ``server.root`` when done)."""
    root = Path(tempfile.mkdtemp(prefix="gpucost-pg-"))
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    pwfile.chmod(0o600)
    server = PgServer(root, _free_port(), pwfile)
    _as_postgres(str(PG_BIN / "initdb"), "-D", str(server.data), "-U", "postgres", f"--pwfile={pwfile}",
                 "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "-E", "UTF8")
    server.start()
    return server


@pytest.fixture(name="postgres", scope="session")
def postgres_fixture() -> Iterator[PgServer]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)")
    server = start_server()
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped by a fault test
        shutil.rmtree(server.root, ignore_errors=True)


@dataclass(frozen=True)
class LedgerTarget:
    """Where a test's ledger lives: a SQLite path or a PostgreSQL URL (with its password file)."""

    backend: str
    target: str
    password_file: Path | None = None


@pytest.fixture(name="ledger_target", params=["sqlite", "postgres"])
def ledger_target_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerTarget:
    """The same ledger test against both backends."""
    if request.param == "sqlite":
        return LedgerTarget("sqlite", str(tmp_path / "l.db"))
    server: PgServer = request.getfixturevalue("postgres")
    return LedgerTarget("postgres", server.database(), server.password_file)


def raw_execute(t: LedgerTarget, *statements: str) -> None:
    """Run statements on the ledger's database behind the ledger's back (to set up a fault)."""
    if t.backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(t.target, isolation_level=None)
        for s in statements:
            conn.execute(s)
        conn.close()
        return
    import psycopg

    with psycopg.connect(t.target, password=PASSWORD, autocommit=True) as pg:
        for s in statements:
            pg.execute(s.encode())
