"""Why a ledger call failed, in one word from a short fixed list: the label of
``gpucost_ledger_write_failures_total`` and the reason in its log lines.

The words name the database's state (full, failing, read-only, corrupt, locked, unreachable), not the
statement: a write that fails for one of them leaves the ledger down (``gpucost_ledger_up`` 0, ``/readyz``
503, no agent acknowledged) until a write succeeds again. Anything else (a bug in a statement) is ``other``.
"""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass, field

from exporter.logs import get_logger

log = get_logger("aggregator")

DISK_FULL = "disk_full"
IO_ERROR = "io_error"
READ_ONLY = "read_only"
CORRUPT = "corrupt"
LOCKED = "locked"
UNREACHABLE = "unreachable"
OTHER = "other"
#: Every reason a failure is counted under (bounded label values).
REASONS = (DISK_FULL, IO_ERROR, READ_ONLY, CORRUPT, LOCKED, UNREACHABLE, OTHER)

#: SQLite's primary result codes (the low byte of an extended code), https://sqlite.org/rescode.html.
_SQLITE = {13: DISK_FULL, 10: IO_ERROR, 14: IO_ERROR, 8: READ_ONLY, 11: CORRUPT, 26: CORRUPT, 5: LOCKED, 6: LOCKED}
#: PostgreSQL SQLSTATE classes and codes: 53100 disk_full, 58030 io_error, 25006 read_only_sql_transaction
#: (a standby), XX001/XX002 data or index corrupted, 08 connection exceptions, 57P01-03 server shutting down.
_PG_CODES = {"53100": DISK_FULL, "58030": IO_ERROR, "25006": READ_ONLY, "XX001": CORRUPT, "XX002": CORRUPT,
             "57P01": UNREACHABLE, "57P02": UNREACHABLE, "57P03": UNREACHABLE}


def fault_of(exc: BaseException) -> str:
    """The reason ``exc`` names (one of ``REASONS``)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is None:
            return OTHER
        return _SQLITE.get(int(code) & 0xFF, OTHER)
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return DISK_FULL
        return READ_ONLY if exc.errno == errno.EROFS else IO_ERROR
    state = getattr(exc, "sqlstate", None)  # psycopg's errors carry the server's SQLSTATE
    if isinstance(state, str):
        return _PG_CODES.get(state, UNREACHABLE if state.startswith("08") else OTHER)
    if _pg_unreachable(exc):
        return UNREACHABLE
    return OTHER


def leaves_ledger_down(reason: str) -> bool:
    """Whether a call failing for ``reason`` means the database cannot take writes now (rather than one
    statement being wrong)."""
    return reason != OTHER


def _pg_unreachable(exc: BaseException) -> bool:
    """A PostgreSQL connection that failed or timed out before any server answered (no SQLSTATE)."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        return False
    return isinstance(exc, psycopg.OperationalError | psycopg_pool.PoolTimeout)


@dataclass(slots=True)
class LedgerHealth:
    """Whether a ledger takes writes now, and how many failed since start, by reason."""

    opened: bool = False
    #: Why the database cannot take writes now (one of ``REASONS``); "" while it can. Set by a call failing for
    #: such a reason, cleared by the next write that commits (or, when it was unreachable, by any call it answers).
    fault: str = ""
    write_failures: dict[str, int] = field(default_factory=dict)

    @property
    def up(self) -> bool:
        """Open, and taking writes (``gpucost_ledger_up``)."""
        return self.opened and not self.fault

    def failed(self, exc: BaseException, *, write: bool, where: str) -> None:
        """Count a failed write by its reason; a reason that says the database cannot take writes takes the ledger
        down (logged once per streak, with the error)."""
        reason = fault_of(exc)
        if write:
            self.write_failures[reason] = self.write_failures.get(reason, 0) + 1
        if leaves_ledger_down(reason):
            if not self.fault:
                log.error("ledger_write_failed" if write else "ledger_unavailable", ledger=where, reason=reason,
                          error=str(exc) or type(exc).__name__)
            self.fault = reason

    def succeeded(self, *, write: bool, where: str) -> None:
        """A call the database answered: a committed write ends a fault, any answer ends being unreachable."""
        if self.fault and (write or self.fault == UNREACHABLE):
            log.info("ledger_write_recovered", ledger=where, reason=self.fault,
                     failures=sum(self.write_failures.values()))
            self.fault = ""
