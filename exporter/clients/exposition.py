"""A fast parser for the Prometheus text exposition format, as DCGM Exporter emits it.

prometheus-client's parser is written for generality (one family object per name, many small
allocations); this one returns flat samples, uses a regular expression for the common case of
label values without escapes, and falls back to a character scanner only for escaped values.
A malformed line is skipped and counted, never fatal: one bad line must not lose a whole scrape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LINE_RE = re.compile(rf"^({_NAME})[ \t]*(?:\{{(.*)\}})?[ \t]*([^ \t{{}}]+)(?:[ \t]+(-?\d+))?[ \t]*$")
_PAIR_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*)"[ \t]*(?:,|$)')
_VALID_NAME = re.compile(rf"^{_NAME}$")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
#: Label sets repeat scrape after scrape (same devices, same holders): parsed ones are kept, bounded.
_LABEL_CACHE: dict[str, dict[str, str]] = {}
_LABEL_CACHE_MAX = 50_000


@dataclass(slots=True)
class Sample:
    """One exposition sample. ``labels`` may be shared between samples and scrapes: treat it as read-only."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None


@dataclass(slots=True)
class ParseResult:
    """Samples in input order, plus HELP/TYPE metadata and the count of lines skipped as malformed."""

    samples: list[Sample] = field(default_factory=list)
    help: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    first_error: str | None = None


def _parse_value(text: str) -> float:
    if "_" in text:
        raise ValueError(text)
    low = text.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    return float(text)


def _scan_labels(text: str) -> dict[str, str]:
    """Slow path: parse ``a="x\\"y",b="z"`` honouring escapes. Raises ValueError when malformed."""
    labels: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return labels
        m = _LABEL_NAME.match(text, i)
        if not m:
            raise ValueError("bad label name")
        name = m.group(0)
        i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != "=":
            raise ValueError("expected '='")
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != '"':
            raise ValueError("expected '\"'")
        i += 1
        buf: list[str] = []
        while True:
            if i >= n:
                raise ValueError("unterminated label value")
            c = text[i]
            if c == "\\":
                if i + 1 >= n or text[i + 1] not in _ESCAPES:
                    raise ValueError("bad escape")
                buf.append(_ESCAPES[text[i + 1]])
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        if name in labels:
            raise ValueError(f"duplicate label {name}")
        labels[name] = "".join(buf)
        while i < n and text[i] in " \t":
            i += 1
        if i < n:
            if text[i] != ",":
                raise ValueError("expected ','")
            i += 1


def _fast_labels(text: str) -> dict[str, str] | None:
    """Fast path for label sets without backslashes; None when the text needs the slow path."""
    labels: dict[str, str] = {}
    pos = 0
    for m in _PAIR_RE.finditer(text):
        if m.start() != pos:
            return None
        name = m.group(1)
        if name in labels:
            return None
        labels[name] = m.group(2)
        pos = m.end()
    if pos != len(text) and text[pos:].strip():
        return None
    return labels


def parse_exposition(text: str, only: Collection[str] | None = None) -> ParseResult:
    """Parse exposition text into flat samples. Never raises on malformed content.

    ``only``: metric names to keep; other sample lines are skipped before any parsing, which is where
    the agent's speed comes from (it reads a handful of DCGM Exporter's two dozen families).
    """
    result = ParseResult()
    samples = result.samples
    line_re = _LINE_RE
    for line in text.split("\n"):
        if not line or line.isspace():
            continue
        if only is not None and line[0] != "#":
            end = line.find("{")
            name = line[:end] if end > 0 else line.split(None, 1)[0]
            if name not in only:
                continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if parts[1] == "HELP":
                    result.help[parts[2]] = (parts[3] if len(parts) > 3 else "").replace("\\n", "\n")
                else:
                    result.types[parts[2]] = parts[3].strip() if len(parts) > 3 else "untyped"
            continue
        m = line_re.match(line.rstrip("\r"))
        try:
            if not m:
                raise ValueError("not a sample line")
            name, label_text, value_text, ts = m.groups()
            labels: dict[str, str]
            if label_text is None or not label_text.strip():
                labels = {}
            else:
                cached = _LABEL_CACHE.get(label_text)
                if cached is not None:
                    labels = cached
                else:
                    if "\\" not in label_text:
                        fast = _fast_labels(label_text)
                        labels = fast if fast is not None else _scan_labels(label_text)
                    else:
                        labels = _scan_labels(label_text)
                    if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
                        _LABEL_CACHE.clear()
                    _LABEL_CACHE[label_text] = labels
            samples.append(Sample(name, labels, _parse_value(value_text), int(ts) if ts else None))
        except ValueError as exc:
            result.errors += 1
            if result.first_error is None:
                result.first_error = f"{exc}: {line[:120]!r}"
    return result
