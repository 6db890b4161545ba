"""clean_text: what a child process printed, made safe for the DB, argv and environ."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from orchestrator.domain.text import clean_text

FFFD = "\ufffd"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("plain text", None, "plain text", id="plain-unchanged"),
        pytest.param("", None, "", id="empty"),
        pytest.param("a\x00b\x00\x00c", None, "abc", id="nul-removed"),
        pytest.param("\x00", None, "", id="only-nul"),
        pytest.param("a\ud800b", None, f"a{FFFD}b", id="lone-high-surrogate"),
        pytest.param("a\udfff", None, f"a{FFFD}", id="lone-low-surrogate"),
        pytest.param("\ud83d\ude00", None, FFFD * 2, id="surrogate-pair-code-points"),
        pytest.param("\U0001f600", None, "\U0001f600", id="astral-character-kept"),
        pytest.param("é\u2028ü\ufffe", None, "é\u2028ü\ufffe", id="other-unicode-kept"),
        pytest.param("\x01\x1b[31m", None, "\x01\x1b[31m", id="other-controls-kept"),
        pytest.param("abcdef", 3, "abc", id="limit-ascii"),
        pytest.param("abc", 3, "abc", id="limit-exact"),
        pytest.param("abc", 10, "abc", id="limit-above-length"),
        pytest.param("abc", 0, "", id="limit-zero"),
        pytest.param("ééé", 3, "é", id="limit-inside-two-byte-char"),
        pytest.param("ééé", 4, "éé", id="limit-on-two-byte-boundary"),
        pytest.param("\U0001f600x", 3, "", id="limit-inside-four-byte-char"),
        pytest.param("\U0001f600x", 4, "\U0001f600", id="limit-after-four-byte-char"),
        pytest.param("\x00\x00abc", 3, "abc", id="limit-counts-after-nul-removal"),
        pytest.param("\ud800a", 3, FFFD, id="limit-counts-replacement-as-3-bytes"),
        pytest.param("\ud800a", 2, "", id="limit-inside-replacement"),
    ],
)
def test_clean_text(text: str, limit: int | None, expected: str) -> None:
    assert clean_text(text, limit) == expected


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        clean_text("abc", -1)


def test_large_text_is_handled() -> None:
    text = ("é\x00\ud800" * 1_000_000)[:-1]
    cleaned = clean_text(text, limit=1_000_001)
    assert cleaned.encode("utf-8")
    assert len(cleaned.encode("utf-8")) <= 1_000_001


@settings(max_examples=examples(1000), deadline=None)
@given(st.text(), st.none() | st.integers(0, 64))
def test_result_is_storable_and_a_maximal_prefix(text: str, limit: int | None) -> None:
    cleaned = clean_text(text, limit)
    encoded = cleaned.encode("utf-8")  # no surrogate left
    assert "\x00" not in cleaned
    full = clean_text(text)
    assert full.startswith(cleaned)
    assert clean_text(cleaned) == cleaned
    if limit is not None:
        assert len(encoded) <= limit
        if cleaned != full:  # cut: the next character would not have fitted
            assert len(encoded) + len(full[len(cleaned)].encode("utf-8")) > limit


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00")))
def test_clean_text_is_the_identity_on_clean_text(text: str) -> None:
    assert clean_text(text) == text
