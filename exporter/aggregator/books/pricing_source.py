"""The pricing file: validated at start (exit 2 on error), reloaded when it changes on disk.

``GPUCOST_PRICING_FILE`` may also name a directory (a mounted ConfigMap): every ``*.yaml``,
``*.yml`` and ``*.json`` file in it is one or more dated documents, and a change to any of them
reloads the lot. Hidden entries (the ConfigMap's ``..data`` links) are skipped.
"""

from __future__ import annotations

from pathlib import Path

from exporter.logs import get_logger
from exporter.model.pricing.document import (
    Pricing,
    PricingError,
    SourcedDoc,
    build_pricing,
    parse_documents,
    parse_pricing,
)

log = get_logger("pricing")
DEFAULT_PRICING = "currency: USD\ndefault_price: 1.0\n"
DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json")

Stamp = tuple[tuple[str, int, int], ...]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise PricingError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _documents_in(directory: Path) -> list[Path]:
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        raise PricingError(f"{directory}: cannot read: {exc.strerror or exc}") from None
    return [p for p in entries if p.suffix in DOCUMENT_SUFFIXES and not p.name.startswith(".") and p.is_file()]


def load_pricing_file(path: Path | None) -> Pricing:
    """Read and validate a file or a directory of files; raises ``PricingError`` naming the file and field."""
    if path is None:
        return parse_pricing(DEFAULT_PRICING, "(built-in default pricing)")
    if not path.is_dir():
        return parse_pricing(_read(path), str(path))
    files = _documents_in(path)
    if not files:
        raise PricingError(f"{path}: no pricing documents (*.yaml, *.yml, *.json) in the directory")
    docs: list[SourcedDoc] = []
    for file in files:
        docs.extend(parse_documents(_read(file), str(file)))
    return build_pricing(docs)


class PricingSource:
    """Holds the current pricing; ``maybe_reload`` swaps it when a file's mtime/size changes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.current = load_pricing_file(path)
        self._stamp = self._stat()
        self.reload_errors = 0
        self.reloads = 0

    def _stat(self) -> Stamp | None:
        if self.path is None:
            return None
        try:
            files = _documents_in(self.path) if self.path.is_dir() else [self.path]
            stats = [(str(f), f.stat()) for f in files]
        except (OSError, PricingError):
            return None
        return tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats)

    def maybe_reload(self) -> bool:
        """Swap in the file's new contents when they changed and are valid; else keep the last good ones."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self.current = load_pricing_file(self.path)
        except PricingError as exc:
            self.reload_errors += 1
            log.error("pricing_reload_failed_keeping_previous", error=str(exc))
            return False
        self.reloads += 1
        log.info("pricing_reloaded", path=str(self.path))
        return True
