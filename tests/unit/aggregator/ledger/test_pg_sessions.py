"""A ledger session left inside a transaction (a leader paused mid-tick: SIGSTOP, a frozen VM) is ended by the
server, so the locks it held (the fence row's) do not keep the next leader from taking its term until it wakes."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from exporter.aggregator.ledger.postgres import IDLE_IN_TRANSACTION_TIMEOUT_MS, _connect_kwargs
from exporter.aggregator.ledger.store import Ledger
from tests.pg import PgServer, postgres_fixture

_FIXTURES = (postgres_fixture,)  # used by name
LOCK = "SELECT value FROM meta WHERE key = 'schema_version' FOR UPDATE"


async def test_a_session_paused_inside_a_transaction_is_ended_and_its_locks_freed(postgres: PgServer) -> None:
    """A row locked by a session that then says nothing: refused to another session at once, free to it once the
    idle-in-transaction timeout (10 s) has passed, and the paused session is gone."""
    url = postgres.database()
    ledger = Ledger(url, password_file=postgres.password_file)
    await ledger.open()  # the schema
    await ledger.close()
    paused = psycopg.connect(url, **_connect_kwargs(postgres.password_file))
    other = psycopg.connect(url, **_connect_kwargs(postgres.password_file))
    try:
        paused.execute(LOCK)
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(LOCK + " NOWAIT")
        other.rollback()
        await asyncio.sleep(IDLE_IN_TRANSACTION_TIMEOUT_MS / 1000 + 1.5)
        other.execute(LOCK + " NOWAIT")  # freed by the server
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            paused.execute("SELECT 1")
    finally:
        other.close()
        paused.close()
