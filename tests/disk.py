"""A full disk for tests, for real: a small tmpfs (mounting needs root; otherwise the test is skipped, saying
why) and a file that fills it to the last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, *, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` at ``where``, unmounted after; skips the test when it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> None:
    """Write zeros to ``path`` until the filesystem is full (ENOSPC)."""
    block = b"\0" * 65536
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                block = block[: len(block) // 2]
                if not block:
                    return
