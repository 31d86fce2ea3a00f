"""The DCGM exposition parser: correctness on DCGM Exporter's shapes, hostile input, and equivalence
with prometheus-client's parser on anything both accept."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.clients.exposition import parse_exposition
from tests.conftest import DCGM_FIXTURES


def test_escapes_nan_inf_timestamps_and_bad_lines() -> None:
    """Escaped label values, special floats and timestamps parse; a malformed line is skipped and counted."""
    text = (
        '# HELP m A help with \\n newline\n# TYPE m gauge\n'
        'm{a="x\\"y",b="back\\\\slash",c="line\\nbreak"} NaN 1700000000000\n'
        'm{a="2"} +Inf\nm{a="3"} -Inf\n'
        "this is { not valid\n"
        'm{a="4",} 1.5e3\n'
        "bare 7\n"
    )
    r = parse_exposition(text)
    assert r.errors == 1
    assert r.types["m"] == "gauge"
    s = r.samples
    assert s[0].labels == {"a": 'x"y', "b": "back\\slash", "c": "line\nbreak"}
    assert math.isnan(s[0].value) and s[0].timestamp_ms == 1700000000000
    assert s[1].value == math.inf and s[2].value == -math.inf
    assert s[3].labels == {"a": "4"} and s[3].value == 1500.0
    assert (s[4].name, s[4].labels, s[4].value) == ("bare", {}, 7.0)


@pytest.mark.parametrize("line", [
    'm{a="unterminated} 1', 'm{a="1",a="2"} 1', "m{a=1} 1", "m 1_000", "m{} ", '{a="1"} 1', "m 1 2_0",
    'm{__name__="q"} 1', 'm{__reserved="1"} 1', 'm{a="1", ="2"} 1', "m{a=\"1\",,b=\"2\"} 1", "m-x 1", "m",
    "m 1 99" + "9" * 400,
])
def test_malformed_lines_never_raise(line: str) -> None:
    """Each line prometheus-client refuses is counted as one error, never an exception."""
    with pytest.raises(Exception):  # noqa: B017 - prometheus-client raises ValueError, IndexError or OverflowError
        list(text_string_to_metric_families(line + "\n"))
    r = parse_exposition(line + "\n")
    assert r.errors == 1 and r.samples == []


@pytest.mark.parametrize("text", ["# TYPE m\n", "# TYPE m foo\n", '# HELP "m 1\n', "# HELP m-x doc\n",
                                  "# TYPE _total counter\n"])
def test_malformed_help_and_type_lines_are_counted(text: str) -> None:
    """A HELP/TYPE line prometheus-client refuses is one error, and the samples around it still parse."""
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(text))
    r = parse_exposition("a 1\n" + text + "b 2\n")
    assert r.errors == 1 and [(s.name, s.value) for s in r.samples] == [("a", 1.0), ("b", 2.0)]


# -- what prometheus-client accepts that a strict reading would not: each value written by hand -------
def _theirs(text: str) -> list[tuple[str, dict[str, str], float, object]]:
    return [(s.name, s.labels, s.value, s.timestamp) for f in text_string_to_metric_families(text) for s in f.samples]


def _ours(text: str) -> list[tuple[str, dict[str, str], float, float | None]]:
    r = parse_exposition(text)
    assert r.errors == 0, r.first_error
    return [(s.name, s.labels, s.value, s.timestamp_ms) for s in r.samples]


def test_literal_tab_inside_a_label_value() -> None:
    """A tab inside a label value is part of the value."""
    assert _theirs('m{a="x\ty"} 1\n') == [("m", {"a": "x\ty"}, 1, None)]
    assert _ours('m{a="x\ty"} 1\n') == [("m", {"a": "x\ty"}, 1.0, None)]


def test_leading_whitespace_before_the_name() -> None:
    """Whitespace around a line is ignored (the line is stripped)."""
    text = ' m 1\n\tm{a="1"} 2 \t\n'
    assert _theirs(text) == [("m", {}, 1, None), ("m", {"a": "1"}, 2, None)]
    assert _ours(text) == [("m", {}, 1.0, None), ("m", {"a": "1"}, 2.0, None)]


def test_fractional_and_exponent_timestamps() -> None:
    """A timestamp may be any number: 1.5 ms is 0.0015 s to prometheus-client; we keep the ms as written."""
    text = 'm{a="1"} 1 1.5\nm 2 -2.5e1\nm 3 -7\n'
    assert _theirs(text) == [("m", {"a": "1"}, 1, 0.0015), ("m", {}, 2, -0.025), ("m", {}, 3, -0.007)]
    assert _ours(text) == [("m", {"a": "1"}, 1.0, 1.5), ("m", {}, 2.0, -25.0), ("m", {}, 3.0, -7)]


def test_tokens_between_value_and_timestamp_are_ignored() -> None:
    """`m 1 2 3`: the first token is the value and the last the timestamp; prometheus-client ignores the rest."""
    text = "m 1 2 3\nm 4 junk 5\n"
    assert _theirs(text) == [("m", {}, 1, 0.003), ("m", {}, 4, 0.005)]
    assert _ours(text) == [("m", {}, 1.0, 3), ("m", {}, 4.0, 5)]


@pytest.mark.parametrize(("line", "expected"), [
    ("m{} 1", ("m", {}, 1.0)),
    ("m{,} 1", ("m", {}, 1.0)),
    ('m{ a = "1" , } 2', ("m", {"a": "1"}, 2.0)),
    ('m{a="1"}3', ("m", {"a": "1"}, 3.0)),
    ('m{a="bad\\q"} 4', ("m", {"a": "bad\\q"}, 4.0)),  # an unknown escape stays as written
    ('m-x{a="1"} 5', ("m-x", {"a": "1"}, 5.0)),  # a labelled sample's name is not checked
    ('{"q"} 6', ("q", {}, 6.0)),  # a bare quoted string in the braces is the name
    ('{__name__="q",a="1"} 7', ("q", {"a": "1"}, 7.0)),
    ('m{"a b"="1"} 8', ("m", {"a b": "1"}, 8.0)),  # quoted UTF-8 label name
    ("m\t \t9", ("m", {}, 9.0)),
    ("m 1e1 # {trace_id=\"x\"} 2", ("m", {}, 10.0)),  # an exemplar-like tail: its last token is the timestamp
    ("inf", ("in", {}, math.inf)),  # no separator: the name is all but the last character
])
def test_lenient_lines_read_as_prometheus_client_reads_them(line: str,
                                                            expected: tuple[str, dict[str, str], float]) -> None:
    """Lines a strict reading would refuse but prometheus-client reads: we read them the same way."""
    assert [(n, labels, float(v)) for n, labels, v, _ in _theirs(line + "\n")] == [expected]
    assert [(n, labels, v) for n, labels, v, _ in _ours(line + "\n")] == [expected]


def test_family_rules_type_checked_when_the_family_ends() -> None:
    """An unknown TYPE is refused only if no later TYPE line for the same family corrects it."""
    assert _ours("# TYPE m foo\n# TYPE m gauge\nm 1\n") == [("m", {}, 1.0, None)]
    assert parse_exposition("# TYPE m foo\nm 1\n").errors == 1


def test_huge_body_is_linear_and_bounded() -> None:
    """A 10 MB body of junk and samples parses without raising."""
    junk = ("x" * 1000 + "\n") * 5000 + 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 150\n' * 5000
    r = parse_exposition(junk)
    assert r.errors == 5000 and len(r.samples) == 5000


# -- property: whatever prometheus-client parses, ours parses to the same samples ---------------------
_label_value = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12) | \
    st.text(alphabet='\t "\\{},=#ab', max_size=8)
_label_name = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)
_metric_name = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
_number = st.one_of(st.floats(width=64).map(repr), st.integers(-10**12, 10**12).map(str),
                    st.sampled_from(["NaN", "nan", "+Inf", "-Inf", "Inf", "inf", "-0", "1e3", "-2.5E-1", ".5", "5."]))
_timestamp = st.one_of(st.integers(-10**15, 10**15).map(str), st.sampled_from(["1.5", "-2.5", "1e3", "-1E2", "0"]))
_space = st.sampled_from([" ", "  ", "\t", " \t ", "\t\t"])
_edge_space = st.sampled_from(["", "", " ", "\t", "  \t"])
_help_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=16) | \
    st.text(alphabet="\\n\" \tx", max_size=10)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def _label_set(draw: st.DrawFn) -> str:
    """`{...}`: escapes, tabs, spaces around `=` and `,`, empty sets, trailing commas."""
    labels = draw(st.dictionaries(_label_name.filter(lambda n: not n.startswith("__")), _label_value, max_size=4))
    pad = draw(st.sampled_from(["", " ", "\t"]))
    pairs = [f'{k}{pad}={pad}"{_escape(v)}"' for k, v in labels.items()]
    return "{" + (pad + ",").join(pairs) + draw(st.sampled_from(["", ",", ", "])) + "}"


@st.composite
def _sample_line(draw: st.DrawFn, name: str) -> str:
    labels = draw(st.one_of(st.just(""), _label_set()))
    line = draw(_edge_space) + name + labels + draw(_space) + draw(_number)
    if draw(st.booleans()):
        middle = draw(st.sampled_from(["", "", "x", "1"]))
        line += draw(_space) + (middle + draw(_space) if middle else "") + draw(_timestamp)
    return line + draw(_edge_space)


@st.composite
def _expositions(draw: st.DrawFn) -> str:
    lines = []
    for name in draw(st.lists(_metric_name, min_size=1, max_size=4, unique=True)):
        if draw(st.booleans()):
            lines.append(f"#{draw(_space)}HELP{draw(_space)}{name} {draw(_help_text)}")
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["gauge", "counter", "untyped", "unknown", "summary", "histogram"]))
            lines.append(f"# TYPE {name} {kind}")
        for _ in range(draw(st.integers(1, 4))):
            lines.append(draw(_sample_line(draw(st.sampled_from([name, name + "_total", name + "_sum"])))))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "  ", "# a comment", "#", "\t"])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _assert_same_as_prometheus_client(text: str) -> None:
    """Where prometheus-client accepts the text, ours reads the same samples with no error."""
    try:
        families = list(text_string_to_metric_families(text))
    except Exception:  # it refuses with ValueError, IndexError or OverflowError
        parse_exposition(text)  # must not raise
        return
    ours = parse_exposition(text)
    assert ours.errors == 0, ours.first_error
    theirs = [(f.type, s) for f in families for s in f.samples]
    assert len(ours.samples) == len(theirs)
    for mine, (kind, s) in zip(ours.samples, theirs, strict=True):
        # prometheus-client appends _total to counters; we keep the name the exposition used.
        suffix = "_total" if kind == "counter" else ""
        assert (mine.name.removesuffix(suffix), mine.labels) == (s.name.removesuffix(suffix), s.labels)
        assert _same(mine.value, float(s.value))
        assert (mine.timestamp_ms is None) == (s.timestamp is None)
        if mine.timestamp_ms is not None:
            assert isinstance(s.timestamp, float)  # seconds, from the text's milliseconds
            assert _same(mine.timestamp_ms / 1000, s.timestamp)


@pytest.mark.timeout(300)  # 400 generated expositions, 39 s on a loaded machine
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_expositions())
def test_property_same_samples_as_prometheus_client(text: str) -> None:
    """Generated expositions (HELP/TYPE, escapes, tabs, odd spacing, timestamps): same samples, no error."""
    _assert_same_as_prometheus_client(text)


_fragments = st.sampled_from(["m", "a", " ", "\t", "{", "}", '"', "\\", "=", ",", "1", "-", ".", "e", "inf", "nan",
                              "_", ":", "#", " # ", "HELP", "TYPE", "__name__", "\n", "gauge", "counter"])


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(_fragments, max_size=24).map("".join))
def test_property_fragment_soup_accepts_exactly_what_prometheus_client_accepts(text: str) -> None:
    """Random mixes of the grammar's tokens: errors iff prometheus-client refuses, else the same samples."""
    try:
        list(text_string_to_metric_families(text))
        refused = False
    except Exception:  # it refuses with ValueError, IndexError or OverflowError
        refused = True
    assert (parse_exposition(text).errors > 0) == refused
    _assert_same_as_prometheus_client(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_property_arbitrary_text_never_raises(text: str) -> None:
    """Arbitrary text never raises, and each sample comes from its own non-comment line."""
    r = parse_exposition(text)
    lines = [ln for ln in text.split("\n") if ln.strip() and ln.strip()[0] != "#"]
    assert len(r.samples) <= len(lines)
    _assert_same_as_prometheus_client(text)


@pytest.mark.timeout(180)  # generated expositions
@settings(max_examples=100, deadline=None)
@given(_expositions())
def test_property_name_filter_keeps_exactly_the_named_samples(text: str) -> None:
    """Filtering by name (the agent's fast path) yields exactly the unfiltered samples of those names."""
    full = parse_exposition(text).samples
    names = {s.name for s in full[::2]}
    filtered = parse_exposition(text, only=names).samples
    assert [(s.name, s.labels, repr(s.value)) for s in filtered] == [(s.name, s.labels, repr(s.value))
                                                                       for s in full if s.name in names]


def test_every_fixture_parses_like_prometheus_client() -> None:
    """Every captured file parses with no errors and to the same samples as prometheus-client."""
    paths = sorted(DCGM_FIXTURES.glob("*.txt"))
    assert len(paths) == 7  # every capture listed in SOURCES.md
    for path in paths:
        text = path.read_text()
        ours = parse_exposition(text)
        assert ours.errors == 0, path.name
        # prometheus-client appends _total to counters that lack it; DCGM's counters lack it.
        theirs = [(s.name.removesuffix("_total"), s.labels, s.value)
                  for f in text_string_to_metric_families(text) for s in f.samples]
        assert [(s.name.removesuffix("_total"), s.labels, s.value) for s in ours.samples] == theirs, path.name
