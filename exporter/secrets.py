"""Secrets read from files (mounted Kubernetes Secrets): re-read when the file changes, never logged."""

from __future__ import annotations

import hmac
from pathlib import Path


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
