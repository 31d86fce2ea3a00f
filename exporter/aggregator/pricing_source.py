"""The pricing file: validated at start (exit 2 on error), reloaded when it changes on disk."""

from __future__ import annotations

from pathlib import Path

from exporter.logs import get_logger
from exporter.model.pricing import Pricing, PricingError, parse_pricing

log = get_logger("pricing")
DEFAULT_PRICING = "currency: USD\ndefault_price: 1.0\n"


def load_pricing_file(path: Path | None) -> Pricing:
    """Read and validate; raises ``PricingError`` naming the file and field."""
    if path is None:
        return parse_pricing(DEFAULT_PRICING, "(built-in default pricing)")
    try:
        text = path.read_text()
    except OSError as exc:
        raise PricingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_pricing(text, str(path))


class PricingSource:
    """Holds the current pricing; ``maybe_reload`` swaps it when the file's mtime/size changes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.current = load_pricing_file(path)
        self._stamp = self._stat()
        self.reload_errors = 0
        self.reloads = 0

    def _stat(self) -> tuple[float, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def maybe_reload(self) -> bool:
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
