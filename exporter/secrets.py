"""Secrets read from files (mounted Kubernetes Secrets): re-read when the file changes, never logged."""

from __future__ import annotations

import hmac
import stat
from pathlib import Path


def secret_file_problem(path: Path) -> str:
    """Why ``path`` cannot hold a secret now (missing, unreadable, not a regular file, empty), or "".

    Checked at start so that a mistyped path is one line and exit 2, not a daemon that answers 401 to everyone
    (or, for an empty token, a check that can never pass). A FIFO or device is refused unread: reading it
    would block or never end."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or type(exc).__name__})"
    if stat.S_ISDIR(st.st_mode):
        return f"{path}: is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: is not a regular file"
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return f"{path}: is not text"
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or type(exc).__name__})"
    if not text.strip():
        return f"{path}: is empty" if not text else f"{path}: holds only whitespace"
    return ""


class SecretFile:
    """A token kept in a file. ``repr`` never shows it; comparisons are constant-time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[float, int] | None = None
        self._value = ""
        self.value()  # fail at start (OSError) when the file is missing

    def __repr__(self) -> str:
        return f"SecretFile({str(self.path)!r})"

    def value(self) -> str:
        """The token, re-read only when the file's mtime or size has changed (a rotated Secret)."""
        st = self.path.stat()
        stamp = (st.st_mtime, st.st_size)
        if stamp != self._stamp:
            self._value = self.path.read_text().strip()
            self._stamp = stamp
        return self._value

    def matches_bearer(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries this token; False while the file cannot be read."""
        if not header or not header.startswith("Bearer "):
            return False
        try:
            expected = self.value()
        except OSError:
            return False
        return bool(expected) and hmac.compare_digest(header[len("Bearer "):].encode(), expected.encode())
