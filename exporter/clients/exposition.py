"""A fast parser for the Prometheus text exposition format, as DCGM Exporter emits it.

It accepts exactly what prometheus-client's text parser (0.26, default UTF-8 name validation) accepts
and yields the same samples, because operators compare our readings with what their own tooling
reads from the same endpoint. Two differences are deliberate: counters keep the name they were
exposed under (prometheus-client appends ``_total``), and a line prometheus-client would reject makes
it raise for the whole body, where we skip and count that line: one bad line must not lose a scrape.

Speed: DCGM lines (``NAME{a="v",...} VALUE``, no escapes) match one regular expression whose every
match provably reads the same as the general path; anything else goes through ``exposition_grammar``,
a line-for-line rendering of prometheus-client's rules. Label sets repeat scrape after scrape and
are parsed once.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from exporter.clients.exposition_grammar import (
    family_error,
    help_text,
    is_legacy_name,
    parse_sample_line,
    split_comment,
    to_number,
    unquote,
    valid_name,
)
from exporter.model.samples import Sample

#: NAME, optional {labels}, one space, value, optional one space and timestamp. Tokens hold no
#: whitespace, quote or brace once they parse as numbers, and the labels are accepted only when they
#: match _LABELS, so the general path splits such a line the same way.
_FAST_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)(?: (\S+))?")
_LABEL = r'(?!__)[a-zA-Z_][a-zA-Z0-9_]*="[^"\\{}]*"'
_LABELS = re.compile(rf"(?:{_LABEL}(?:,{_LABEL})*,?)?")
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')
_ALLOWED_SUFFIXES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}
#: Label sets repeat scrape after scrape (same devices, same holders): parsed ones are kept, bounded.
_LABEL_CACHE: dict[str, dict[str, str]] = {}
_LABEL_CACHE_MAX = 50_000
_COMMENT_CACHE: dict[str, tuple[str, str, str] | None] = {}


@dataclass(slots=True)
class ParseResult:
    """Samples in input order, plus HELP/TYPE metadata and the count of lines skipped as malformed."""

    samples: list[Sample] = field(default_factory=list)
    help: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    first_error: str | None = None

    def error(self, reason: str, line: str) -> None:
        """Count one malformed line; the first one is kept for the log."""
        self.errors += 1
        if self.first_error is None:
            self.first_error = f"{reason}: {line[:120]!r}"


@dataclass(slots=True)
class _Family:
    """The metric family the last HELP/TYPE line opened: which sample names belong to it.

    Samples that belong to a family with an empty name are dropped, as prometheus-client drops them.
    """

    name: str = ""
    type: str = "untyped"
    allowed: tuple[str, ...] = ()


def _fast_sample(line: str) -> Sample | None:
    """The DCGM shape, or None when the line needs the general path (which also reports errors)."""
    m = _FAST_LINE.fullmatch(line)
    if m is None:
        return None
    name, label_text, value_text, ts_text = m.groups()
    if "_" in value_text:
        return None
    try:
        value = float(value_text)
        ts = None if ts_text is None else to_number(ts_text, timestamp=True)
    except ValueError:
        return None
    if not label_text:
        return Sample(name, {}, value, ts)
    labels = _LABEL_CACHE.get(label_text)
    if labels is None:
        if _LABELS.fullmatch(label_text) is None:
            return None
        pairs = _PAIR.findall(label_text)
        labels = dict(pairs)
        if len(labels) != len(pairs):
            return None  # a duplicate label name: the general path reports it
        if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
            _LABEL_CACHE.clear()
        _LABEL_CACHE[label_text] = labels
    return Sample(name, labels, value, ts)


def _close_family(family: _Family, result: ParseResult, *, line: str) -> None:
    """prometheus-client validates a family (its name and TYPE) when the next one starts."""
    if family.name:
        reason = family_error(family.name, family.type)
        if reason:
            result.error(reason, line)


def _read_comment(line: str) -> tuple[str, str, str] | None:
    """("HELP", name, text) or ("TYPE", name, type) for a HELP/TYPE line, None for another comment."""
    parts = split_comment(line)
    if len(parts) < 2:
        return None
    name = ""
    if len(parts) > 2:
        if parts[1] not in ("HELP", "TYPE"):
            return None
        name, quoted = unquote(parts[2])
        if not quoted and not is_legacy_name(name):
            raise ValueError(f"invalid metric name in {parts[1]}")
    if parts[1] == "HELP":
        return "HELP", name, help_text(parts[3]) if len(parts) == 4 else ""
    if parts[1] == "TYPE":
        if len(parts) < 4:
            raise ValueError("TYPE without a type")
        return "TYPE", name, parts[3]
    return None


def _comment(line: str, family: _Family, *, result: ParseResult) -> None:
    """HELP and TYPE lines open a family; other comments are ignored. Both repeat every scrape: cached."""
    if line in _COMMENT_CACHE:
        read = _COMMENT_CACHE[line]
    else:
        read = _read_comment(line)
        if len(_COMMENT_CACHE) >= _LABEL_CACHE_MAX:
            _COMMENT_CACHE.clear()
        _COMMENT_CACHE[line] = read
    if read is None:
        return
    kind, name, text = read
    if name != family.name:
        _close_family(family, result, line=line)
        family.name = name
        if kind == "HELP":
            family.type, family.allowed = "untyped", (name,)
    if kind == "HELP":
        if name:
            result.help[name] = text
    else:
        family.type = text
        family.allowed = tuple(name + s for s in _ALLOWED_SUFFIXES.get(text, ("",)))
        if name:
            result.types[name] = text


def parse_exposition(text: str, only: Collection[str] | None = None) -> ParseResult:
    """Parse exposition text into flat samples. Never raises on malformed content.

    ``only``: metric names to keep; other sample lines are skipped before any parsing where the name
    is certain from the text before ``{``, which is where the agent's speed comes from (it reads a
    handful of DCGM Exporter's two dozen families).
    """
    result = ParseResult()
    samples = result.samples
    family = _Family()
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            try:
                _comment(line, family, result=result)
            except ValueError as exc:
                result.error(str(exc) or "bad comment line", line)
            continue
        if only is not None:
            brace = line.find("{")
            if brace > 0:
                head = line[:brace]
                if '"' not in head and " # " not in head and head.strip() not in only:
                    continue
        sample = _fast_sample(line)
        if sample is None:
            try:
                name, labels, value, ts = parse_sample_line(line)
            except ValueError as exc:
                result.error(str(exc) or "not a sample line", line)
                continue
            sample = Sample(name, labels, value, ts)
        if sample.name not in family.allowed:
            _close_family(family, result, line=line)
            family.name, family.type, family.allowed = "", "untyped", ()
            if not valid_name(sample.name):
                result.error("invalid metric name", line)
                continue
        elif not family.name:
            continue
        if only is None or sample.name in only:
            samples.append(sample)
    _close_family(family, result, line="(end of body)")
    return result
