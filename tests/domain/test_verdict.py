"""parse_verdict and coerce_verdict: the seeds' tables, our own edge cases, properties."""

from __future__ import annotations

import json
import math
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from orchestrator.domain import verdict as verdict_module
from orchestrator.domain.text import clean_text
from orchestrator.domain.verdict import (
    MAX_SCAN_CHARS,
    Verdict,
    coerce_verdict,
    parse_verdict,
    strict_pass_problem,
)

FENCE = "```"


def v(
    passed: bool = False,
    score: float = 0.0,
    reasons: tuple[str, ...] = (),
    next_hint: str = "",
) -> Verdict:
    """An expected verdict; unspecified fields take the coercion defaults."""
    return Verdict(passed=passed, score=score, reasons=reasons, next_hint=next_hint)


def obj(**fields: object) -> str:
    """JSON text of an object; `pass_` stands for the reserved word `pass`."""
    if "pass_" in fields:
        fields["pass"] = fields.pop("pass_")
    return json.dumps(fields)


def assert_contract(verdict: Verdict) -> None:
    """Every field has its contract type and range and can be stored anywhere."""
    assert type(verdict.passed) is bool
    assert type(verdict.score) is float
    assert math.isfinite(verdict.score)
    assert 0.0 <= verdict.score <= 1.0
    assert type(verdict.reasons) is tuple
    assert all(type(reason) is str for reason in verdict.reasons)
    assert type(verdict.next_hint) is str
    for text in (*verdict.reasons, verdict.next_hint):
        assert "\x00" not in text
        text.encode("utf-8")  # raises on any surrogate
    json.dumps(verdict.to_dict(), allow_nan=False)


# --- seed 000: the 22 tests of tests/test_parse_verdict.py --------------------
# Four names are quoted in the seed (test_other_truthy_string_pass,
# test_pass_with_surrounding_whitespace, test_score_clamped_high,
# test_score_numeric_string_ok); the rest are named after the seed's
# one-line descriptions, class by class, in the seed's order.

SEED_TESTS = [
    # TestStrictBaseline (2)
    pytest.param(obj(pass_=True, score=0.9), v(True, 0.9), id="seed-test_bool_pass_true"),
    pytest.param(obj(pass_=False, score=0.2), v(False, 0.2), id="seed-test_bool_pass_false"),
    # TestPassStringCoercion (6)
    pytest.param(obj(pass_="true"), v(True), id="seed-test_string_true_pass"),
    pytest.param(obj(pass_="false"), v(False), id="seed-test_string_false_pass"),
    pytest.param(obj(pass_="FaLsE"), v(False), id="seed-test_string_pass_case_insensitive"),
    pytest.param(obj(pass_="  true  "), v(True), id="seed-test_pass_with_surrounding_whitespace"),
    pytest.param(obj(pass_=""), v(False), id="seed-test_empty_string_pass"),
    pytest.param(obj(pass_="yes"), v(True), id="seed-test_other_truthy_string_pass"),
    # TestScoreClamping (9; "edges" checks both ends)
    pytest.param(obj(score=1.5), v(score=1.0), id="seed-test_score_clamped_high"),
    pytest.param(obj(score=-0.3), v(score=0.0), id="seed-test_score_clamped_low"),
    pytest.param(obj(score=0.0), v(score=0.0), id="seed-test_score_edges-0.0"),
    pytest.param(obj(score=1.0), v(score=1.0), id="seed-test_score_edges-1.0"),
    pytest.param('{"score": NaN}', v(score=0.5), id="seed-test_score_nan"),
    pytest.param('{"score": Infinity}', v(score=0.5), id="seed-test_score_infinity"),
    pytest.param(obj(score="great"), v(score=0.5), id="seed-test_score_non_numeric_string"),
    pytest.param(obj(score="0.75"), v(score=0.75), id="seed-test_score_numeric_string_ok"),
    pytest.param(obj(pass_=True), v(True, 0.0), id="seed-test_score_missing"),
    pytest.param(obj(score=None), v(score=0.5), id="seed-test_score_none"),
    # TestFenceBlockStillWorks (2)
    pytest.param(
        f"Here is my verdict:\n{FENCE}json\n{obj(pass_=True, score=0.8)}\n{FENCE}\n",
        v(True, 0.8),
        id="seed-test_fence_block_bool_pass",
    ),
    pytest.param(
        f"Verdict:\n{FENCE}json\n{obj(pass_='false', score=7)}\n{FENCE}\nThanks.",
        v(False, 1.0),
        id="seed-test_fence_block_string_pass_clamped_score",
    ),
    # TestOptionalKeysPreserved (3)
    pytest.param(
        obj(pass_=False, score=0.4, reasons=["a", "b"], next_hint="fix b"),
        v(False, 0.4, ("a", "b"), "fix b"),
        id="seed-test_reasons_and_next_hint_preserved",
    ),
    pytest.param(obj(pass_=True, score=1), v(True, 1.0), id="seed-test_missing_reasons_empty"),
    pytest.param(
        obj(pass_=True, reasons="one string"), v(True), id="seed-test_non_list_reasons_empty"
    ),
]


# --- seed 001: adversarial tables A1-A8 -------------------------------------

SEED_TABLES = [
    # A1: `pass` as other JSON types -> bool(x)
    pytest.param(obj(pass_=None), v(False), id="A1-pass-null"),
    pytest.param(obj(pass_=[]), v(False), id="A1-pass-empty-list"),
    pytest.param(obj(pass_=[False]), v(True), id="A1-pass-list-false"),
    pytest.param(obj(pass_=[True]), v(True), id="A1-pass-list-true"),
    pytest.param(obj(pass_={}), v(False), id="A1-pass-empty-dict"),
    pytest.param(obj(pass_=0), v(False), id="A1-pass-0"),
    pytest.param(obj(pass_=1), v(True), id="A1-pass-1"),
    pytest.param(obj(pass_=-1), v(True), id="A1-pass-minus-1"),
    pytest.param(obj(pass_=1.5), v(True), id="A1-pass-1.5"),
    # A2: `score` as non-numeric types -> 0.5
    pytest.param(obj(score=[]), v(score=0.5), id="A2-score-empty-list"),
    pytest.param(obj(score={}), v(score=0.5), id="A2-score-empty-dict"),
    pytest.param(obj(score=[1, 2]), v(score=0.5), id="A2-score-list"),
    pytest.param(obj(score="high"), v(score=0.5), id="A2-score-high"),
    pytest.param(obj(score=None), v(score=0.5), id="A2-score-null"),
    # A3: out-of-range numeric strings are clamped
    pytest.param(obj(score="2.0"), v(score=1.0), id="A3-score-string-2.0"),
    pytest.param(obj(score="-0.5"), v(score=0.0), id="A3-score-string-minus-0.5"),
    pytest.param(obj(score="0.75"), v(score=0.75), id="A3-score-string-0.75"),
    # A4: bare NaN / Infinity / -Infinity tokens -> 0.5
    pytest.param('{"score": NaN}', v(score=0.5), id="A4-score-NaN"),
    pytest.param('{"score": Infinity}', v(score=0.5), id="A4-score-Infinity"),
    pytest.param('{"score": -Infinity}', v(score=0.5), id="A4-score-minus-Infinity"),
    # A5: JSON booleans as score
    pytest.param(obj(score=True), v(score=1.0), id="A5-score-true"),
    pytest.param(obj(score=False), v(score=0.0), id="A5-score-false"),
    # A6: abbreviated strings fall through to bool(s.strip())
    pytest.param(obj(pass_="t"), v(True), id="A6-pass-t"),
    pytest.param(obj(pass_="T"), v(True), id="A6-pass-T"),
    pytest.param(obj(pass_="f"), v(True), id="A6-pass-f"),
    # A7: both coercions at once
    pytest.param(
        '{"pass": "false", "score": NaN}', v(False, 0.5, (), ""), id="A7-pass-false-score-NaN"
    ),
    # A8: any whitespace around "true"/"false" is stripped
    pytest.param(obj(pass_="\n true "), v(True), id="A8-pass-newline-true"),
    pytest.param(obj(pass_="\t\nTRUE\t"), v(True), id="A8-pass-tab-newline-TRUE"),
    pytest.param(obj(pass_="  true  "), v(True), id="A8-pass-spaces-true"),
    pytest.param(obj(pass_="\n\tfalse \n"), v(False), id="A8-pass-newline-tab-false"),
]


@pytest.mark.parametrize(("text", "expected"), SEED_TESTS + SEED_TABLES)
def test_seed_cases(text: str, expected: Verdict) -> None:
    verdict = parse_verdict(text)
    assert verdict == expected
    assert verdict is not None
    assert_contract(verdict)
    assert coerce_verdict(json.loads(_json_part(text))) == expected


def _json_part(text: str) -> str:
    """The JSON in a seed case: the fence's content, or the whole text."""
    opener = f"{FENCE}json\n"
    if opener not in text:
        return text
    return text.rsplit(opener, maxsplit=1)[1].split(FENCE, maxsplit=1)[0]


def test_seed_a7_full_dict() -> None:
    verdict = parse_verdict('{"pass": "false", "score": NaN}')
    assert verdict is not None
    assert verdict.to_dict() == {"pass": False, "score": 0.5, "reasons": [], "next_hint": ""}


# --- our own cases -----------------------------------------------------------

GOOD = obj(pass_=True, score=0.9, reasons=["ok"], next_hint="h")
GOOD_V = v(True, 0.9, ("ok",), "h")
A = obj(pass_=True, score=0.25)
A_V = v(True, 0.25)
B = obj(pass_=False, score=0.75)
B_V = v(False, 0.75)
BIG_INT = "9" * 400

OWN_CASES = [
    # the whole text
    pytest.param(GOOD, GOOD_V, id="whole-object"),
    pytest.param(f"\n\n  {GOOD}  \n", GOOD_V, id="whole-object-surrounding-whitespace"),
    pytest.param(f"[{GOOD}]", None, id="whole-array-is-none"),
    pytest.param("0.9", None, id="whole-number-is-none"),
    pytest.param(json.dumps(GOOD), None, id="whole-string-holding-object-is-none"),
    pytest.param("null", None, id="whole-null-is-none"),
    pytest.param("true", None, id="whole-true-is-none"),
    pytest.param("", None, id="empty-text"),
    pytest.param(" \n\t ", None, id="whitespace-only"),
    pytest.param("All good, pass!", None, id="prose-without-json"),
    pytest.param("{}", v(), id="empty-object-is-a-default-verdict"),
    pytest.param(f"\ufeff{A}", A_V, id="bom-then-object-found-by-scan"),
    # prose around JSON
    pytest.param(f"Verdict follows: {A} -- done.", A_V, id="prose-around-object"),
    pytest.param(f"{A} Thanks!", A_V, id="prose-after-object"),
    pytest.param(f'He said "hi. {A}', A_V, id="stray-quote-in-prose"),
    pytest.param(f'note {{"oops\n{A}', A_V, id="unterminated-string-ends-at-newline"),
    # fences
    pytest.param(f"text\n{FENCE}json\n{A}\n{FENCE}\nmore", A_V, id="fence-json"),
    pytest.param(f"{FENCE}JSON\n{A}\n{FENCE}", A_V, id="fence-tag-uppercase"),
    pytest.param(f"{FENCE}json title=v\n{A}\n{FENCE}", A_V, id="fence-tag-with-info-string"),
    pytest.param(f"{FENCE}json\r\n{A}\r\n{FENCE}\r\n", A_V, id="fence-crlf"),
    pytest.param(f"  {FENCE}json\n  {A}\n  {FENCE}", A_V, id="fence-indented"),
    pytest.param(f"{FENCE}json\n{A}", A_V, id="fence-unclosed-runs-to-end"),
    pytest.param(
        f"{FENCE}json\n{A}\n{FENCE}\n{FENCE}json\n{B}\n{FENCE}\n", B_V, id="fence-last-wins"
    ),
    # Fences and bare objects compete by position (a quoted format example
    # in a fence must not beat the verdict written after it).
    pytest.param(f"{FENCE}json\n{A}\n{FENCE}\nthen {B}", B_V, id="later-bare-object-beats-fence"),
    pytest.param(f"{B}\n{FENCE}json\n{A}\n{FENCE}\n", A_V, id="later-fence-beats-bare-object"),
    pytest.param(
        f'Format:\n{FENCE}json\n{{"pass": false, "score": 0}}\n{FENCE}\n'
        'My verdict: {"pass": true, "score": 0.95}',
        v(passed=True, score=0.95),
        id="format-example-then-verdict",
    ),
    pytest.param(
        f"{FENCE}json\n{A}\n{FENCE}\n{FENCE}json\n[1, 2]\n{FENCE}",
        A_V,
        id="fence-holding-array-skipped-for-earlier-fence",
    ),
    pytest.param(
        f"first {A}\n{FENCE}json\n[1, 2]\n{FENCE}",
        A_V,
        id="fence-holding-array-falls-back-to-brace-scan",
    ),
    pytest.param(
        f"x {A}\n{FENCE}json\n{{not json}}\n{FENCE}", A_V, id="fence-invalid-json-falls-back"
    ),
    pytest.param(f"{FENCE}\n{A}\n{FENCE}\nand {B}", B_V, id="bare-fence-is-not-special"),
    pytest.param(f"{FENCE}\n{A}\n{FENCE}", A_V, id="bare-fence-found-by-scan"),
    pytest.param(f"{FENCE}python\n{A}\n{FENCE}", A_V, id="other-tag-found-by-scan"),
    pytest.param(f"{FENCE}json {A}{FENCE}", A_V, id="one-line-fence-is-inline-code"),
    pytest.param(
        f"````markdown\n{FENCE}json\n{B}\n{FENCE}\n````\n{A}",
        A_V,
        id="longer-fence-contains-inner-fence",
    ),
    # several objects, nesting, balance
    pytest.param(f"{B} then {A}", A_V, id="last-of-several-wins"),
    pytest.param(
        'x {"pass": true, "score": 0.5, "detail": {"pass": false, "score": 0.1}} y',
        v(True, 0.5),
        id="nested-object-not-picked",
    ),
    pytest.param(f"{A} and then {{oops}}", A_V, id="last-span-broken-falls-back"),
    pytest.param(f"pre {A} post {{bad {B}}}", A_V, id="broken-span-is-not-searched-inside"),
    pytest.param(f"note {{unclosed\n{A}", A_V, id="unclosed-brace-before"),
    pytest.param(f"{{{{{A}", A_V, id="unclosed-braces-directly-before"),
    pytest.param(f"}} }} {A} }}", A_V, id="stray-closing-braces"),
    pytest.param('{"pass": true', None, id="unbalanced-object-only"),
    pytest.param(f"[{A}, 1] and prose", A_V, id="object-inside-array-in-prose"),
    # strings inside the JSON
    pytest.param(
        'x {"pass": true, "reasons": ["a } b", "{"], "next_hint": "use {x}"} y',
        v(True, 0.0, ("a } b", "{"), "use {x}"),
        id="braces-inside-strings",
    ),
    pytest.param(
        r'x {"pass": true, "reasons": ["say \"}\" now"]} y',
        v(True, 0.0, ('say "}" now',)),
        id="escaped-quote-in-string",
    ),
    pytest.param(
        r'x {"pass": true, "reasons": ["C:\\"], "next_hint": "}"} y',
        v(True, 0.0, ("C:\\",), "}"),
        id="escaped-backslash-before-quote",
    ),
    # numbers
    pytest.param(obj(score="  0.25 "), v(score=0.25), id="score-numeric-string-spaces"),
    pytest.param('{"pass": true, "score": ' + BIG_INT + "}", v(True, 0.5), id="score-400-digits"),
    pytest.param('{"score": 1e400}', v(score=0.5), id="score-1e400"),
    pytest.param('{"score": -1e400}', v(score=0.5), id="score-minus-1e400"),
    pytest.param(obj(score="1e400"), v(score=0.5), id="score-string-1e400"),
    pytest.param(obj(score="nan"), v(score=0.5), id="score-string-nan"),
    pytest.param(obj(score="-inf"), v(score=0.5), id="score-string-minus-inf"),
    pytest.param('{"score": -0.0}', v(score=0.0), id="score-negative-zero"),
    pytest.param(obj(score=1e-300), v(score=1e-300), id="score-tiny"),
    pytest.param(
        A + ' {"score": 1' + "0" * 5000 + "}", A_V, id="score-5000-digits-unparseable-falls-back"
    ),
    pytest.param('{"pass": NaN, "score": -Infinity}', v(True, 0.5), id="pass-NaN-is-truthy"),
    # coercion details
    pytest.param('{"pass": true, "pass": false}', v(False), id="duplicate-keys-last-wins"),
    pytest.param(obj(pass_="0"), v(True), id="pass-string-0-is-truthy"),
    pytest.param(obj(pass_=" FALSE "), v(False), id="pass-string-FALSE-spaces"),
    pytest.param(obj(pass_="   "), v(False), id="pass-whitespace-string"),
    pytest.param(
        '{"reasons": ["a", 1, null, true, {"k": [1, 2]}, 1.5, NaN]}',
        v(reasons=("a", "1", "null", "true", '{"k": [1, 2]}', "1.5", "NaN")),
        id="reasons-non-strings-as-json-text",
    ),
    pytest.param(obj(reasons=["é", {"k": "ü"}]), v(reasons=("é", '{"k": "ü"}')), id="non-ascii"),
    pytest.param(obj(reasons={"a": 1}), v(), id="reasons-object-is-empty"),
    pytest.param(obj(next_hint=5), v(), id="next-hint-number-is-empty"),
    pytest.param(obj(next_hint=["x"]), v(), id="next-hint-list-is-empty"),
    # strings that cannot be stored as they are
    pytest.param(
        r'{"reasons": ["a\u0000b"], "next_hint": "c\u0000d"}',
        v(reasons=("ab",), next_hint="cd"),
        id="nul-removed",
    ),
    pytest.param(
        r'{"reasons": ["\ud800x", {"k": "\udfff"}], "next_hint": "\udfff"}',
        v(reasons=("\ufffdx", '{"k": "\ufffd"}'), next_hint="\ufffd"),
        id="lone-surrogates-replaced",
    ),
    pytest.param(
        r'{"next_hint": "\ud83d\ude00"}', v(next_hint="\U0001f600"), id="escaped-pair-kept"
    ),
]


@pytest.mark.parametrize(("text", "expected"), OWN_CASES)
def test_own_cases(text: str, expected: Verdict | None) -> None:
    verdict = parse_verdict(text)
    assert verdict == expected
    if verdict is not None:
        assert_contract(verdict)


def test_to_dict() -> None:
    verdict = v(True, 0.5, ("a", "b"), "h")
    assert verdict.to_dict() == {
        "pass": True,
        "score": 0.5,
        "reasons": ["a", "b"],
        "next_hint": "h",
    }


# --- big and hostile inputs (each must finish in well under a second) -----------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{" * 10_000_000, id="10MB-of-open-braces"),
        pytest.param('{"' * 5_000_000, id="10MB-of-brace-quote"),
        pytest.param("[" * 100_000, id="100k-open-brackets"),
        pytest.param("{" * 100_000, id="100k-open-braces"),
        pytest.param("[" * 30_000 + "]" * 30_000, id="60k-balanced-brackets"),
        pytest.param('{"a":' * 10_000 + "1" + "}" * 10_000, id="10k-deep-object"),
        pytest.param("{x}" * 30_000, id="30k-unparseable-spans"),
        pytest.param("}" * 100_000, id="100k-closing-braces"),
        pytest.param(f"{FENCE}json\n" * 20_000, id="20k-unclosed-fences"),
    ],
)
def test_hostile_input_is_none(text: str) -> None:
    assert parse_verdict(text) is None


@pytest.mark.parametrize(
    "noise",
    [
        pytest.param("x" * 1_000_000, id="1MB-letters"),
        pytest.param('{"a' * 350_000, id="1MB-open-braces-and-quotes"),
        pytest.param("}" * 1_000_000, id="1MB-closing-braces"),
        pytest.param("[" * 1_000_000, id="1MB-brackets"),
    ],
)
def test_verdict_after_1mb_of_noise(noise: str) -> None:
    assert parse_verdict(f"{noise}\n{A}\n") == A_V


def test_deep_reasons_do_not_break_the_parse() -> None:
    deep = '{"pass": true, "reasons": [' + "[" * 400 + "]" * 400 + "]}"
    verdict = parse_verdict(deep)
    assert verdict is not None
    assert verdict.passed is True
    assert verdict.reasons == ("[" * 400 + "]" * 400,)


def test_only_the_last_window_is_read() -> None:
    tail = "x" * MAX_SCAN_CHARS
    assert parse_verdict(A + tail) is None
    assert parse_verdict(B + tail[: -len(A) - 1] + " " + A) == A_V


def test_window_boundary_inside_an_object() -> None:
    """The window may cut an object in half; the cut part is then prose."""
    long_reason = "r" * MAX_SCAN_CHARS
    text = obj(pass_=True, reasons=[long_reason]) + "\n" + B
    assert parse_verdict(text) == B_V


# --- coerce_verdict on a caller's own Mapping -----------------------------------


class _BadFloat:
    def __float__(self) -> float:
        raise RuntimeError("no")


class _BadBool:
    def __bool__(self) -> bool:
        raise RuntimeError("no")


def _nested_list(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def _circular_list() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(types.MappingProxyType({"pass": "true"}), v(True), id="mapping-proxy"),
        pytest.param({"score": 10**400}, v(score=0.5), id="score-huge-int-overflows"),
        pytest.param({"score": 10**5000}, v(score=0.5), id="score-5000-digit-int"),
        pytest.param({"score": True}, v(score=1.0), id="score-true"),
        pytest.param({"score": -5}, v(score=0.0), id="score-int-low"),
        pytest.param({"score": 3}, v(score=1.0), id="score-int-high"),
        pytest.param({"score": math.nan}, v(score=0.5), id="score-float-nan"),
        pytest.param({"score": _BadFloat()}, v(score=0.5), id="score-broken-float"),
        pytest.param({"pass": _BadBool()}, v(False), id="pass-broken-bool"),
        pytest.param({"reasons": ("a",)}, v(), id="reasons-tuple-is-not-a-list"),
        pytest.param({"reasons": [b"x"]}, v(reasons=("\"b'x'\"",)), id="reasons-bytes-via-str"),
        pytest.param(
            {"reasons": [_circular_list()]}, v(reasons=("[1, [...]]",)), id="reasons-circular"
        ),
        pytest.param(
            {"reasons": [_nested_list(100_000)]},
            v(reasons=("<unprintable list>",)),
            id="reasons-100k-deep-list",
        ),
        pytest.param({"next_hint": "a\x00\ud800"}, v(next_hint="a\ufffd"), id="hint-cleaned"),
    ],
)
def test_coerce_verdict(data: Mapping[str, object], expected: Verdict) -> None:
    verdict = coerce_verdict(data)
    assert verdict == expected
    assert_contract(verdict)


# --- properties ----------------------------------------------------------------

FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    ",",
    " ",
    "\n",
    '"pass"',
    '"score"',
    '"reasons"',
    '"next_hint"',
    '"pass": ',
    '"score": ',
    "true",
    "false",
    "null",
    '"true"',
    '" FALSE "',
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-0.0",
    "0.5",
    "-1",
    "2",
    BIG_INT,
    '"0.75"',
    r'"\ud800"',
    r'"\u0000"',
    r'"\"}"',
    '"\\\\"',
    "\ud800",
    "\x00",
    f"{FENCE}json\n",
    f"{FENCE}\n",
    FENCE,
    '{"pass": true, "score": 0.5}',
]


def assert_parses_cleanly(text: str) -> None:
    """parse_verdict's catch-all is a safety net: the search itself must not raise."""
    data = verdict_module._find_object(text[-MAX_SCAN_CHARS:])
    verdict = parse_verdict(text)
    assert verdict == (None if data is None else coerce_verdict(data))
    if verdict is not None:
        assert_contract(verdict)


jsonish_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=60).map("".join)


@settings(max_examples=examples(2000), deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    assert_parses_cleanly(text)


@settings(max_examples=examples(2000), deadline=None)
@given(jsonish_text)
def test_jsonish_text_never_raises(text: str) -> None:
    assert_parses_cleanly(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
verdict_objects = st.dictionaries(
    st.sampled_from(["pass", "score", "reasons", "next_hint", "other"]), json_values
)


@settings(max_examples=examples(1000), deadline=None)
@given(verdict_objects)
def test_whole_json_object_is_coerced(data: dict[str, object]) -> None:
    verdict = parse_verdict(json.dumps(data))
    assert verdict == coerce_verdict(data)
    assert_contract(verdict)


# Prose may hold anything except what would outrank the verdict: no fence
# anywhere, and after the verdict no brace (a later span) and no bracket (with
# whitespace-only prose the text could become one JSON array).
prose_before = st.text().filter(lambda s: "`" not in s)
prose_after = st.text().filter(lambda s: not any(c in s for c in "`{}[]"))
well_formed = st.fixed_dictionaries(
    {
        "pass": st.booleans(),
        "score": st.floats(0, 1),
        "reasons": st.lists(st.text(), max_size=4),
        "next_hint": st.text(),
    }
)


@settings(max_examples=examples(1000), deadline=None)
@given(well_formed, prose_before, prose_after, st.booleans())
def test_round_trip_through_prose(
    data: dict[str, Any], before: str, after: str, fenced: bool
) -> None:
    body = json.dumps(data)
    if fenced:
        body = f"{FENCE}json\n{body}\n{FENCE}"
    verdict = parse_verdict(f"{before}\n{body}\n{after}")
    assert verdict == Verdict(
        passed=data["pass"],
        score=data["score"],
        reasons=tuple(clean_text(reason) for reason in data["reasons"]),
        next_hint=clean_text(data["next_hint"]),
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"pass": true, "score": 1}', None),
        ('{"pass": false}', None),
        ('{"pass": " True "}', None),
        ('{"pass": "false"}', None),
        ("no verdict here", None),
        ('{"pass": "no"}', 'got "no"'),
        ('{"pass": "0"}', 'got "0"'),
        ('{"pass": 1}', "got 1"),
        ('{"pass": null}', "got null"),
        ('{"score": 1.0}', 'has no "pass"'),
    ],
)
def test_strict_pass_problem(text: str, problem: str | None) -> None:
    found = strict_pass_problem(text)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith("strict_verdict:") and problem in found
