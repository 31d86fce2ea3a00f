"""The line grammar of prometheus-client's text parser (0.26, default UTF-8 name validation).

Its rules are looser and odder than the format's documentation: anything after the value is
tolerated as long as the last token is a number (the timestamp), a labelled sample's name is not
checked against the name pattern, unknown escapes stay as written. We follow them rule for rule
so that whatever it accepts we accept and read the same; the fast path in ``exposition`` handles
the usual lines and defers here for everything else. Every function raises ValueError where
prometheus-client raises anything; none loops without consuming input, and all are linear.
"""

from __future__ import annotations

import re

_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ESCAPE = re.compile(r'\\[\\n"]')
_HELP_ESCAPE = re.compile(r"\\[\\n]")
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_COMMENT_SEPARATORS = " \t\n\r\x0b\x0c"  # string.whitespace
_COMMENT_SPLIT = re.compile(r"[ \t\n\r\x0b\x0c]+")
_METRIC_TYPES = frozenset({"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info",
                           "stateset", "untyped"})


def is_legacy_name(name: str) -> bool:
    """The classic metric-name pattern, which unquoted names must follow."""
    return _LEGACY_NAME.fullmatch(name) is not None


def valid_name(name: str) -> bool:
    """A metric name prometheus-client will build a family for: non-empty UTF-8 (no lone surrogates)."""
    if not name:
        return False
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def family_error(name: str, type_: str) -> str | None:
    """Why prometheus-client refuses to build this family, or None."""
    if type_ not in _METRIC_TYPES:
        return f"invalid metric type {type_!r} for {name}"
    if not valid_name(name.removesuffix("_total") if type_ == "counter" else name):
        return "invalid metric family name"
    return None


def _unescape(match: re.Match[str]) -> str:
    return _UNESCAPED[match.group(0)]


def help_text(text: str) -> str:
    """HELP text unescaped: only ``\\\\`` and ``\\n`` are escapes there."""
    return _HELP_ESCAPE.sub(_unescape, text) if "\\" in text else text


def unquote(text: str) -> tuple[str, bool]:
    """A possibly quoted name or value: stripped, unquoted, unescaped; and whether it was quoted."""
    if not text:
        return text, False
    text = text.strip()
    if not text:
        raise ValueError("empty name")
    quoted = text[0] == '"'
    if quoted:
        if len(text) == 1 or text[-1] != '"':
            raise ValueError("missing close quote")
        text = text[1:-1]
    return (_ESCAPE.sub(_unescape, text) if "\\" in text else text), quoted


def _escaped(text: str, pos: int) -> bool:
    """Whether the character at ``pos`` follows an odd number of backslashes."""
    n = 0
    while pos > n and text[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def unquoted_index(text: str, chars: str, *, start: int = 0) -> int:
    """Index of the first of ``chars`` at or after ``start`` outside double quotes, or -1."""
    in_quotes = False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and not _escaped(text, i):
            in_quotes = not in_quotes
        elif not in_quotes and c in chars:
            return i
    return -1


def split_comment(line: str) -> list[str]:
    """A stripped comment line split on whitespace outside quotes into at most four parts (the last is
    the rest). Without quotes that is a plain split, the common case worth a shortcut."""
    if '"' not in line:
        return _COMMENT_SPLIT.split(line, 3)
    tokens = [""]
    x, n = 0, len(line)
    while x < n:
        pos = unquoted_index(line, _COMMENT_SEPARATORS, start=x)
        if pos == -1:
            tokens[-1] = line[x:]
            break
        if pos == x:
            x += 1
            continue
        if len(tokens) > 3:
            tokens[-1] = line[x:]
            break
        tokens[-1] = line[x:pos]
        x = pos + 1
        tokens.append("")
    return tokens


def to_number(token: str, *, timestamp: bool = False) -> float:
    """A value (always a float) or a timestamp (an int when written as one). Underscores are refused
    although Python allows them; a timestamp prometheus-client cannot turn into seconds is refused."""
    if "_" in token:
        raise ValueError(f"invalid number {token[:40]!r}")
    if not timestamp:
        return float(token)
    try:
        number = int(token)
    except ValueError:
        return float(token)
    try:
        number / 1000
    except OverflowError:
        raise ValueError("timestamp out of range") from None
    return number


def _value_and_timestamp(text: str) -> tuple[float, float | None]:
    """First token is the value, last (if more than one) the timestamp; tokens between are ignored."""
    text = text.lstrip()
    tokens = [t.strip() for t in text.split(" " if " " in text else "\t")]
    tokens = [t for t in tokens if t]
    if not tokens:
        raise ValueError("no value")
    value = to_number(tokens[0])
    return value, (to_number(tokens[-1], timestamp=True) if len(tokens) > 1 else None)


def _label_term(labels: str, pos: int) -> tuple[str, str, int]:
    """The next ``name=value`` term from ``pos``: the raw name, the stripped value, where the rest starts."""
    n = len(labels)
    if labels[pos] == ",":
        pos += 1
        if pos == n:
            return "", "", n
        if labels[pos] == ",":
            raise ValueError("multiple commas")
    split = unquoted_index(labels, "=,}", start=pos)
    if split >= 0 and labels[split] == "=":
        name = labels[pos:split]
        pos = split + 1
        split = unquoted_index(labels, ",}", start=pos)
    else:
        name = "__name__"
    if split == -1:
        split = n
    rest = split
    while rest < n and labels[rest].isspace():
        rest += 1
    return name, labels[pos:split].strip(), rest


def _closing_quote_is_last(value: str) -> bool:
    i = 1
    while i < len(value):
        i = value.index('"', i)
        if not _escaped(value, i):
            break
        i += 1
    return i + 1 == len(value)


def parse_labels(text: str) -> dict[str, str]:
    """The text between the braces; terms may be quoted names, a bare quoted string is ``__name__``."""
    labels: dict[str, str] = {}
    text = text.strip()
    pos, n = 0, len(text)
    try:
        while pos < n:
            raw_name, value, next_pos = _label_term(text, pos)
            if next_pos == pos:
                raise ValueError("no progress")  # prometheus-client loops forever here
            pos = next_pos
            if not value:
                continue
            name, quoted = unquote(raw_name)
            if not quoted and not is_legacy_name(name):
                raise ValueError("bad label name")
            if value[0] != '"' or not _closing_quote_is_last(value):
                raise ValueError("bad label value")
            if name != "__name__" and (name.startswith("__") or not valid_name(name)):
                raise ValueError("reserved or invalid label name")
            if name in labels:
                raise ValueError("duplicate label")
            labels[name] = unquote(value)[0]
    except ValueError as exc:
        raise ValueError(f"invalid labels ({exc})") from None
    return labels


def parse_sample_line(line: str) -> tuple[str, dict[str, str], float, float | None]:
    """A stripped, non-comment line: name, labels, value, timestamp (ms as written)."""
    brace = unquoted_index(line, "{")
    if brace == -1 or " # " in line[:brace]:
        end = unquoted_index(line, " \t")
        name = line[:end].strip()
        if not is_legacy_name(name):
            raise ValueError("invalid metric name")
        return (name, {}, *_value_and_timestamp(line[end + 1:]))
    name = line[:brace].strip()
    close = unquoted_index(line, "}", start=brace)
    close = brace - 1 if close == -1 else close
    labels = parse_labels(line[brace + 1:close])
    if not name:
        if "__name__" not in labels:
            raise ValueError("no metric name")
        name = labels.pop("__name__")
    elif "__name__" in labels:
        raise ValueError("metric name given twice")
    return (name, labels, *_value_and_timestamp(line[close + 1:]))
