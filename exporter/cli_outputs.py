"""What a command may read as a ledger file and what it may replace: no command destroys a file it did not make.

``simulate`` marks the ledger it writes (a ``meta`` row); ``export`` leaves ``FILE.metadata.json`` beside its
file. An existing path is replaced only with ``--overwrite`` and only when it carries that mark; anything else
is refused before a byte is written (one line, exit 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

from exporter.cli_common import UsageError

#: The ``meta`` row ``simulate`` leaves in its ledger: what proves a later ``simulate`` may replace the file.
SIMULATED_KEY = "written_by"
SIMULATED_VALUE = "gpu-cost-exporter simulate"
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def ledger_file_problem(path: Path, *, must_exist: bool) -> str:
    """Why ``path`` cannot be a SQLite ledger file (a directory, a FIFO, unreadable, missing when it must
    exist, in a directory that does not exist), or "". Checked before SQLite opens it: a directory reads as a
    "disk I/O error" and a FIFO blocks the open for ever."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if must_exist:
            return f"{path}: no such ledger"
        return "" if path.parent.is_dir() else f"{path}: no such directory {path.parent}"
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or type(exc).__name__})"
    if stat.S_ISDIR(st.st_mode):
        return f"{path}: is a directory, not a ledger file"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: is not a regular file (a FIFO, socket or device cannot hold a ledger)"
    if not os.access(path, os.R_OK):
        return f"{path}: cannot be read (permission denied)"
    return ""


def check_ledger_file(ledger: str | Path, *, flag: str, must_exist: bool = True) -> None:
    """A usage error naming ``flag`` when ``ledger`` (a path; a PostgreSQL URL passes) cannot be a ledger file."""
    text = str(ledger)
    if text.startswith(("postgresql://", "postgres://")):
        return
    if problem := ledger_file_problem(Path(text), must_exist=must_exist):
        raise UsageError(f"{flag} {problem}")


def is_simulated_ledger(path: Path) -> bool:
    """Whether ``path`` is a SQLite ledger carrying ``simulate``'s mark (read-only; any error: no)."""
    if ledger_file_problem(path, must_exist=True):
        return False
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        rows = conn.execute("SELECT value FROM meta WHERE key = ?", (SIMULATED_KEY,)).fetchall()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return rows == [(SIMULATED_VALUE,)]


def mark_simulated(path: Path) -> None:
    """Leave ``simulate``'s mark in the ledger it just wrote."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (SIMULATED_KEY, SIMULATED_VALUE))
    finally:
        conn.close()


def check_simulate_target(path: Path, *, overwrite: bool) -> None:
    """``simulate --ledger``: a new file in an existing directory, or (with ``overwrite``) a ledger an earlier
    ``simulate`` wrote; anything else is refused untouched."""
    if not path.exists() and not path.is_symlink():
        if problem := ledger_file_problem(path, must_exist=False):
            raise UsageError(f"--ledger {problem}")
        return
    if not is_simulated_ledger(path):
        raise UsageError(f"--ledger {path}: exists and is not a ledger simulate wrote; refusing to replace it "
                         "(choose another path)")
    if not overwrite:
        raise UsageError(f"--ledger {path}: exists (a ledger simulate wrote); --overwrite replaces it")


def replace_ledger(new: Path, target: Path) -> None:
    """Move the finished ``new`` ledger onto ``target`` in one rename; the old ledger's WAL and shared-memory
    files (which belong to it, not to ``new``) go first, so SQLite never pairs them with the new file."""
    for suffix in SQLITE_SIDECARS:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{target}{suffix}").unlink()
    Path(new).replace(target)


def _export_made(path: Path) -> bool:
    """Whether ``path`` is a file ``export`` wrote: its metadata document beside it names it."""
    try:
        doc = json.loads(Path(f"{path}.metadata.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(doc, dict) and doc.get("DataGenerator") == {"DataGenerator": "gpu-cost-exporter"}
            and isinstance(doc.get("Export"), dict) and doc["Export"].get("File") == path.name)


def check_export_target(output: str, *, overwrite: bool) -> None:
    """``export --output``: stdout, a new file, or (with ``overwrite``) a file an earlier export wrote (and its
    metadata document); anything else is refused untouched."""
    if output == "-":
        return
    path = Path(output)
    meta = Path(f"{output}.metadata.json")
    if not any(p.exists() or p.is_symlink() for p in (path, meta)):
        return
    if not _export_made(path) or not path.is_file():
        taken = path if path.exists() or path.is_symlink() else meta
        raise UsageError(f"--output {taken}: exists and is not a file export wrote; refusing to replace it "
                         "(choose another path)")
    if not overwrite:
        raise UsageError(f"--output {output}: exists (an earlier export); --overwrite replaces it")


@contextlib.contextmanager
def export_beside(output: str) -> Iterator[str]:
    """Where ``export`` writes: stdout as itself; a file first beside ``output`` (same directory, so the rename is
    atomic), then it and its metadata (naming ``output``) renamed into place once the export is complete. An
    export that fails leaves the old file, or no file, as it was."""
    if output == "-":
        yield output
        return
    path = Path(output)
    if not path.parent.is_dir():
        raise UsageError(f"--output {output}: no such directory")
    scratch = path.with_name(f".{path.name}.exporting-{os.getpid()}")
    meta, scratch_meta = Path(f"{output}.metadata.json"), Path(f"{scratch}.metadata.json")
    try:
        yield str(scratch)
        doc = json.loads(scratch_meta.read_text())
        doc["Export"]["File"] = path.name
        scratch_meta.write_text(json.dumps(doc, indent=2) + "\n")
        scratch.replace(path)
        scratch_meta.replace(meta)
    finally:
        for leftover in (scratch, scratch_meta):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
